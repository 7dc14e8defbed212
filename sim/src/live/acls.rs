//! The ACL APIs of a broker with no authorizer, which the served cluster
//! is (every client may do everything): DescribeAcls, CreateAcls and
//! DeleteAcls are answered SECURITY_DISABLED, as a Kafka broker without
//! an authorizer answers them (its `AclApis`), so that an admin tool
//! reports that ACLs are off instead of losing its connection.

use super::checks::Checks;
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

/// What an authorizer with no ACLs allows on each kind of resource, as
/// bits of Kafka's `AclOperation` codes: every operation the kind
/// supports (Kafka's `AclEntry.supportedOperations`), which is what a
/// broker without an authorizer reports to a client that asks.
pub(crate) mod allowed {
    /// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS and
    /// ALTER_CONFIGS.
    pub(crate) const TOPIC: i32 =
        (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
    /// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
    /// ALTER_CONFIGS and IDEMPOTENT_WRITE.
    pub(crate) const CLUSTER: i32 =
        (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
    /// READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS (a group
    /// has settings of its own).
    pub(crate) const GROUP: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

    /// `operations` where the request asked for them, else the schemas'
    /// "not asked" value.
    pub(crate) fn if_asked(asked: bool, operations: i32) -> i32 {
        if asked {
            operations
        } else {
            i32::MIN
        }
    }
}

/// Kafka's words for it: DescribeAcls's, then the others'.
const NO_AUTHORIZER_ON_BROKER: &str = "No Authorizer is configured on the broker";
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

fn disabled() -> i16 {
    ResponseError::SecurityDisabled.code()
}

/// One result per item asked, each SECURITY_DISABLED, as the response's
/// own result type (CreateAcls and DeleteAcls each have one, with the
/// same two fields).
macro_rules! each_refused {
    ($items:expr, $result:ty) => {
        $items
            .iter()
            .map(|_| {
                let mut result = <$result>::default();
                result.error_code = disabled();
                result.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER));
                result
            })
            .collect()
    };
}

impl BrokerService {
    pub(crate) fn describe_acls(&self, _: DescribeAclsRequest) -> DescribeAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeAclsResponse::default();
        response.error_code = disabled();
        response.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER_ON_BROKER));
        response
    }

    /// Each creation refused.
    pub(crate) fn create_acls(&self, r: CreateAclsRequest) -> CreateAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = CreateAclsResponse::default();
        response.results = each_refused!(r.creations, AclCreationResult);
        response
    }

    /// Each filter refused.
    pub(crate) fn delete_acls(&self, r: DeleteAclsRequest) -> DeleteAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DeleteAclsResponse::default();
        response.filter_results = each_refused!(r.filters, DeleteAclsFilterResult);
        response
    }
}
