//! The ACL APIs. With `--authorizer`, DescribeAcls, CreateAcls and
//! DeleteAcls read and change the cluster's ACLs (`authorizer.rs`; who
//! may call them is checked in `authorization.rs`). Without, the served
//! cluster has no authorizer (every client may do everything) and they
//! are answered SECURITY_DISABLED, as a Kafka broker without an
//! authorizer answers them (its `AclApis`), so that an admin tool reports
//! that ACLs are off instead of losing its connection.

use super::authorizer::{Acl, AclFilter, Authorizer};
use super::checks::Checks;
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
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

/// A DescribeAcls' or a DeleteAcls' filter, as the authorizer takes it.
macro_rules! filter_of {
    ($r:expr) => {
        AclFilter {
            resource_type: $r.resource_type_filter,
            name: $r.resource_name_filter.as_deref().map(str::to_string),
            pattern: $r.pattern_type_filter,
            principal: $r.principal_filter.as_deref().map(str::to_string),
            host: $r.host_filter.as_deref().map(str::to_string),
            operation: $r.operation,
            permission: $r.permission_type,
        }
    };
}

fn invalid(reason: String) -> (i16, Option<StrBytes>) {
    (
        ResponseError::InvalidRequest.code(),
        Some(StrBytes::from_string(reason)),
    )
}

impl BrokerService {
    fn authorizer(&self) -> Option<&Authorizer> {
        self.cluster.authorizer.as_ref()
    }

    pub(crate) fn describe_acls(&self, r: DescribeAclsRequest) -> DescribeAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeAclsResponse::default();
        if let Some(authorizer) = self.authorizer() {
            response.error_message = None;
            let filter = filter_of!(r);
            if let Err(reason) = filter.validate() {
                (response.error_code, response.error_message) = invalid(reason);
                return response;
            }
            // One entry per resource pattern, its ACLs under it.
            for acl in authorizer.describe(&filter) {
                let same = |res: &DescribeAclsResource| {
                    res.resource_type == acl.resource_type
                        && res.resource_name.as_str() == acl.name
                        && res.pattern_type == acl.pattern
                };
                let i = match response.resources.iter().position(same) {
                    Some(i) => i,
                    None => {
                        let mut resource = DescribeAclsResource::default();
                        resource.resource_type = acl.resource_type;
                        resource.resource_name = StrBytes::from_string(acl.name.clone());
                        resource.pattern_type = acl.pattern;
                        response.resources.push(resource);
                        response.resources.len() - 1
                    }
                };
                let mut description = AclDescription::default();
                description.principal = StrBytes::from_string(acl.principal);
                description.host = StrBytes::from_string(acl.host);
                description.operation = acl.operation;
                description.permission_type = acl.permission;
                response.resources[i].acls.push(description);
            }
            return response;
        }
        response.error_code = disabled();
        response.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER_ON_BROKER));
        response
    }

    /// Each creation made, or refused with its reason.
    pub(crate) fn create_acls(&self, r: CreateAclsRequest) -> CreateAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = CreateAclsResponse::default();
        let Some(authorizer) = self.authorizer() else {
            response.results = each_refused!(r.creations, AclCreationResult);
            return response;
        };
        response.results = (r.creations.into_iter())
            .map(|c| {
                let acl = Acl {
                    resource_type: c.resource_type,
                    name: c.resource_name.to_string(),
                    pattern: c.resource_pattern_type,
                    principal: c.principal.to_string(),
                    host: c.host.to_string(),
                    operation: c.operation,
                    permission: c.permission_type,
                };
                let mut result = AclCreationResult::default();
                result.error_message = None;
                if let Err(reason) = authorizer.create(acl) {
                    (result.error_code, result.error_message) = invalid(reason);
                }
                result
            })
            .collect();
        response
    }

    /// The ACLs each filter matches deleted.
    pub(crate) fn delete_acls(&self, r: DeleteAclsRequest) -> DeleteAclsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DeleteAclsResponse::default();
        let Some(authorizer) = self.authorizer() else {
            response.filter_results = each_refused!(r.filters, DeleteAclsFilterResult);
            return response;
        };
        response.filter_results = (r.filters.iter())
            .map(|f| {
                let mut result = DeleteAclsFilterResult::default();
                result.error_message = None;
                let filter = filter_of!(f);
                if let Err(reason) = filter.validate() {
                    (result.error_code, result.error_message) = invalid(reason);
                    return result;
                }
                result.matching_acls = (authorizer.delete(&filter).into_iter())
                    .map(|acl| {
                        let mut matching = DeleteAclsMatchingAcl::default();
                        matching.error_message = None;
                        matching.resource_type = acl.resource_type;
                        matching.resource_name = StrBytes::from_string(acl.name);
                        matching.pattern_type = acl.pattern;
                        matching.principal = StrBytes::from_string(acl.principal);
                        matching.host = StrBytes::from_string(acl.host);
                        matching.operation = acl.operation;
                        matching.permission_type = acl.permission;
                        matching
                    })
                    .collect();
                result
            })
            .collect();
        response
    }
}
