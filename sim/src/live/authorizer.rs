//! The served cluster's ACLs and the decisions made from them, as Kafka's
//! `StandardAuthorizer` makes them (`--authorizer`):
//!
//! - a super user (`--super-user`) may do everything;
//! - an ACL applies to a resource by its exact name (`LITERAL`), by every
//!   name (`LITERAL` `*`) or by a prefix of the name (`PREFIXED`), and to
//!   a request by its principal (or `User:*`) and its client's address
//!   (or `*`);
//! - a `DENY` that applies wins over any `ALLOW`; an `ALLOW` of `READ`,
//!   `WRITE`, `DELETE` or `ALTER` also allows `DESCRIBE`, one of
//!   `ALTER_CONFIGS` also `DESCRIBE_CONFIGS`, one of `ALL` everything;
//! - a resource that no ACL applies to, whoever for, is allowed to
//!   everyone only with `--allow-everyone-if-no-acl-found` (Kafka's
//!   `allow.everyone.if.no.acl.found`, off by default); otherwise, what no
//!   ACL allows is denied.
//!
//! The codes are Kafka's (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), as the ACL APIs carry them.

use parking_lot::RwLock;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// Kafka's codes for what an ACL names.
pub(crate) mod code {
    pub(crate) const ANY: i8 = 1;

    pub(crate) const TOPIC: i8 = 2;
    pub(crate) const GROUP: i8 = 3;
    pub(crate) const CLUSTER: i8 = 4;
    pub(crate) const TRANSACTIONAL_ID: i8 = 5;
    pub(crate) const DELEGATION_TOKEN: i8 = 6;
    pub(crate) const USER: i8 = 7;

    pub(crate) const MATCH: i8 = 2;
    pub(crate) const LITERAL: i8 = 3;
    pub(crate) const PREFIXED: i8 = 4;

    pub(crate) const ALL: i8 = 2;
    pub(crate) const READ: i8 = 3;
    pub(crate) const WRITE: i8 = 4;
    pub(crate) const CREATE: i8 = 5;
    pub(crate) const DELETE: i8 = 6;
    pub(crate) const ALTER: i8 = 7;
    pub(crate) const DESCRIBE: i8 = 8;
    pub(crate) const CLUSTER_ACTION: i8 = 9;
    pub(crate) const DESCRIBE_CONFIGS: i8 = 10;
    pub(crate) const ALTER_CONFIGS: i8 = 11;
    pub(crate) const IDEMPOTENT_WRITE: i8 = 12;
    pub(crate) const CREATE_TOKENS: i8 = 13;
    pub(crate) const DESCRIBE_TOKENS: i8 = 14;
    pub(crate) const TWO_PHASE_COMMIT: i8 = 15;

    pub(crate) const DENY: i8 = 2;
    pub(crate) const ALLOW: i8 = 3;
}

/// The one name a cluster resource has.
pub(crate) const CLUSTER_NAME: &str = "kafka-cluster";

/// The name that stands for every resource, and the host and principal
/// that stand for every client.
const WILDCARD: &str = "*";
const WILDCARD_PRINCIPAL: &str = "User:*";

/// The operations each kind of resource has (Kafka's
/// `AclEntry.supportedOperations`): what `operations` reports on.
fn supported(resource_type: i8) -> &'static [i8] {
    use code::*;
    match resource_type {
        TOPIC => &[
            READ,
            WRITE,
            CREATE,
            DESCRIBE,
            DELETE,
            ALTER,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
        ],
        GROUP => &[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS],
        CLUSTER => &[
            CREATE,
            CLUSTER_ACTION,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
            IDEMPOTENT_WRITE,
            ALTER,
            DESCRIBE,
        ],
        TRANSACTIONAL_ID => &[DESCRIBE, WRITE, TWO_PHASE_COMMIT],
        DELEGATION_TOKEN => &[DESCRIBE],
        USER => &[CREATE_TOKENS, DESCRIBE_TOKENS],
        _ => &[],
    }
}

/// One ACL: which resources, whose requests from where, which operation,
/// allowed or denied.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Acl {
    pub resource_type: i8,
    pub name: String,
    pub pattern: i8,
    /// `User:NAME`, or `User:*`.
    pub principal: String,
    /// A client's address as it is written (`127.0.0.1`), or `*`.
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

impl Acl {
    /// Whether it may be created, with Kafka's reasons when not.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(code::TOPIC..=code::USER).contains(&self.resource_type) {
            return Err(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(self.pattern, code::LITERAL | code::PREFIXED) {
            return Err(format!("Invalid patternType {}", self.pattern));
        }
        if !(code::ALL..=code::TWO_PHASE_COMMIT).contains(&self.operation) {
            return Err(format!("Invalid operation {}", self.operation));
        }
        if !matches!(self.permission, code::DENY | code::ALLOW) {
            return Err(format!("Invalid permissionType {}", self.permission));
        }
        if self.name.is_empty() {
            return Err("Resource name should not be empty".into());
        }
        if !self.principal.contains(':') {
            return Err(format!(
                "Could not parse principal from `{}` (no colon is present separating the \
                 principal type from the principal name)",
                self.principal
            ));
        }
        Ok(())
    }

    /// Whether it applies to `name`, a resource of its type.
    fn covers(&self, name: &str) -> bool {
        match self.pattern {
            code::LITERAL => self.name == name || self.name == WILDCARD,
            code::PREFIXED => name.starts_with(self.name.as_str()),
            _ => false,
        }
    }

    /// What it says of `operation` asked by `who`: `Some(true)` allowed,
    /// `Some(false)` denied, `None` nothing (Kafka's `findResult`).
    fn decides(&self, who: &Requester, operation: i8) -> Option<bool> {
        if self.principal != who.principal && self.principal != WILDCARD_PRINCIPAL {
            return None;
        }
        if self.host != WILDCARD && self.host != who.host {
            return None;
        }
        let allow = self.permission == code::ALLOW;
        // Only an ALLOW implies the lesser operations: a DENY of READ does
        // not deny DESCRIBE.
        let applies = self.operation == code::ALL
            || self.operation == operation
            || (allow
                && match operation {
                    code::DESCRIBE => matches!(
                        self.operation,
                        code::READ | code::WRITE | code::DELETE | code::ALTER
                    ),
                    code::DESCRIBE_CONFIGS => self.operation == code::ALTER_CONFIGS,
                    _ => false,
                });
        applies.then_some(allow)
    }
}

/// Which ACLs a DescribeAcls or a DeleteAcls asks for: each field either
/// a value or "any" (`None`, or the `ANY` code); a name with `MATCH` asks
/// for every ACL that applies to that resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AclFilter {
    pub resource_type: i8,
    pub name: Option<String>,
    pub pattern: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl AclFilter {
    /// Whether it can match anything known, with Kafka's reason when not.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let known = |code: i8, last: i8| (code::ANY..=last).contains(&code);
        if !known(self.resource_type, code::USER) || !known(self.pattern, code::PREFIXED) {
            return Err("Unknown patternFilter.".into());
        }
        if !known(self.operation, code::TWO_PHASE_COMMIT) || !known(self.permission, code::ALLOW) {
            return Err("Unknown entryFilter.".into());
        }
        Ok(())
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub(crate) fn matches(&self, acl: &Acl) -> bool {
        let any_or = |asked: i8, is: i8| asked == code::ANY || asked == is;
        let none_or = |asked: &Option<String>, is: &str| asked.as_deref().is_none_or(|a| a == is);
        let pattern = any_or(self.resource_type, acl.resource_type)
            && (matches!(self.pattern, code::ANY | code::MATCH) || self.pattern == acl.pattern)
            && match &self.name {
                None => true,
                Some(name) if self.pattern == code::MATCH => acl.covers(name),
                Some(name) => *name == acl.name,
            };
        pattern
            && none_or(&self.principal, &acl.principal)
            && none_or(&self.host, &acl.host)
            && any_or(self.operation, acl.operation)
            && any_or(self.permission, acl.permission)
    }
}

/// Who asks, as ACLs name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requester {
    /// `User:NAME` (`User:ANONYMOUS` on a plaintext listener).
    pub principal: String,
    /// The client's address, as an ACL's host is written.
    pub host: String,
}

/// The ACLs and the rules that decide from them.
#[derive(Debug)]
pub(crate) struct Authorizer {
    /// `User:NAME` each.
    super_users: BTreeSet<String>,
    allow_if_no_acl: bool,
    acls: RwLock<BTreeSet<Acl>>,
    /// Checks answered yes and no ([`authorize`](Self::authorize) and
    /// [`authorize_any`](Self::authorize_any) calls), for the report: a
    /// listing filtered to what a principal may describe counts a no for
    /// each resource left out. (Kafka's authorizer logs its checks to its
    /// audit log instead, denials of what was not asked for by name left
    /// out.)
    allowed: AtomicU64,
    denied: AtomicU64,
}

impl Authorizer {
    pub(crate) fn new(super_users: BTreeSet<String>, allow_if_no_acl: bool) -> Self {
        Authorizer {
            super_users,
            allow_if_no_acl,
            acls: RwLock::new(BTreeSet::new()),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
        }
    }

    /// How many checks were answered yes and no so far.
    pub(crate) fn decisions(&self) -> (u64, u64) {
        let get = |count: &AtomicU64| count.load(Ordering::Relaxed);
        (get(&self.allowed), get(&self.denied))
    }

    fn counted(&self, allowed: bool) -> bool {
        let count = if allowed { &self.allowed } else { &self.denied };
        count.fetch_add(1, Ordering::Relaxed);
        allowed
    }

    /// Whether `who` may do `operation` on the resource `name` of
    /// `resource_type`.
    pub(crate) fn authorize(
        &self,
        who: &Requester,
        operation: i8,
        resource_type: i8,
        name: &str,
    ) -> bool {
        self.counted(self.decide(who, operation, resource_type, name))
    }

    /// [`authorize`](Self::authorize), uncounted.
    fn decide(&self, who: &Requester, operation: i8, resource_type: i8, name: &str) -> bool {
        if self.super_users.contains(&who.principal) {
            return true;
        }
        let acls = self.acls.read();
        let mut any_acl = false;
        let mut allowed = false;
        for acl in acls.iter() {
            if acl.resource_type != resource_type || !acl.covers(name) {
                continue;
            }
            any_acl = true;
            match acl.decides(who, operation) {
                Some(false) => return false,
                Some(true) => allowed = true,
                None => {}
            }
        }
        allowed || (!any_acl && self.allow_if_no_acl)
    }

    /// Whether `who` may do `operation` on some resource of
    /// `resource_type`, whichever (Kafka's `authorizeByResourceType`): an
    /// ALLOW for it that no DENY of the same operation covers entirely.
    pub(crate) fn authorize_any(&self, who: &Requester, operation: i8, resource_type: i8) -> bool {
        self.counted(self.decide_any(who, operation, resource_type))
    }

    fn decide_any(&self, who: &Requester, operation: i8, resource_type: i8) -> bool {
        // A resource no ACL names at all, when that allows everyone.
        if self.decide(who, operation, resource_type, "hardcode") {
            return true;
        }
        let acls = self.acls.read();
        let applying: Vec<&Acl> = acls
            .iter()
            .filter(|acl| {
                acl.resource_type == resource_type
                    && (acl.principal == who.principal || acl.principal == WILDCARD_PRINCIPAL)
                    && (acl.host == WILDCARD || acl.host == who.host)
                    && (acl.operation == operation || acl.operation == code::ALL)
            })
            .collect();
        let denies = |acl: &Acl| {
            applying.iter().any(|deny| {
                deny.permission == code::DENY
                    && match deny.pattern {
                        code::LITERAL => {
                            deny.name == WILDCARD
                                || (acl.pattern == code::LITERAL && deny.name == acl.name)
                        }
                        _ => acl.name.starts_with(deny.name.as_str()),
                    }
            })
        };
        applying
            .iter()
            .any(|acl| acl.permission == code::ALLOW && !denies(acl))
    }

    /// The operations `who` may do on the resource, as bits of their
    /// codes (Kafka's authorized operations fields); not counted among
    /// the checks, being a description rather than a request's check.
    pub(crate) fn operations(&self, who: &Requester, resource_type: i8, name: &str) -> i32 {
        supported(resource_type)
            .iter()
            .filter(|&&operation| self.decide(who, operation, resource_type, name))
            .fold(0, |bits, &operation| bits | (1 << operation))
    }

    /// Adds `acl` (one already there is left as it is).
    pub(crate) fn create(&self, acl: Acl) -> Result<(), String> {
        acl.validate()?;
        self.acls.write().insert(acl);
        Ok(())
    }

    /// The ACLs `filter` matches.
    pub(crate) fn describe(&self, filter: &AclFilter) -> Vec<Acl> {
        let acls = self.acls.read();
        acls.iter()
            .filter(|acl| filter.matches(acl))
            .cloned()
            .collect()
    }

    /// Removes the ACLs `filter` matches, and returns them.
    pub(crate) fn delete(&self, filter: &AclFilter) -> Vec<Acl> {
        let mut acls = self.acls.write();
        let gone: Vec<Acl> = acls
            .iter()
            .filter(|acl| filter.matches(acl))
            .cloned()
            .collect();
        for acl in &gone {
            acls.remove(acl);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::code::*;
    use super::*;

    fn who(user: &str) -> Requester {
        Requester {
            principal: format!("User:{user}"),
            host: "127.0.0.1".into(),
        }
    }

    fn acl(
        resource_type: i8,
        name: &str,
        pattern: i8,
        principal: &str,
        operation: i8,
        permission: i8,
    ) -> Acl {
        Acl {
            resource_type,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission,
        }
    }

    fn authorizer(acls: &[Acl]) -> Authorizer {
        let a = Authorizer::new(BTreeSet::from(["User:admin".to_string()]), false);
        for acl in acls {
            a.create(acl.clone()).expect("a valid ACL");
        }
        a
    }

    #[test]
    fn what_no_acl_allows_is_denied_except_to_super_users() {
        let a = authorizer(&[]);
        assert!(!a.authorize(&who("alice"), READ, TOPIC, "orders"));
        assert!(a.authorize(&who("admin"), READ, TOPIC, "orders"));
        let open = Authorizer::new(BTreeSet::new(), true);
        assert!(open.authorize(&who("alice"), READ, TOPIC, "orders"));
        // Once any ACL names the resource, only what it allows is allowed.
        open.create(acl(TOPIC, "orders", LITERAL, "User:bob", READ, ALLOW))
            .unwrap();
        assert!(!open.authorize(&who("alice"), READ, TOPIC, "orders"));
        assert!(open.authorize(&who("alice"), READ, TOPIC, "payments"));
    }

    #[test]
    fn literal_wildcard_and_prefixed_names_apply() {
        let a = authorizer(&[
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "logs-", PREFIXED, "User:alice", READ, ALLOW),
            acl(GROUP, "*", LITERAL, "User:*", READ, ALLOW),
        ]);
        let alice = who("alice");
        assert!(a.authorize(&alice, WRITE, TOPIC, "orders"));
        assert!(!a.authorize(&alice, WRITE, TOPIC, "orders2"));
        assert!(!a.authorize(&alice, READ, TOPIC, "orders"));
        assert!(a.authorize(&alice, READ, TOPIC, "logs-web"));
        assert!(!a.authorize(&alice, READ, TOPIC, "logs"));
        assert!(a.authorize(&who("carol"), READ, GROUP, "anything"));
        assert!(!a.authorize(&who("carol"), DELETE, GROUP, "anything"));
    }

    #[test]
    fn deny_wins_and_only_allows_imply_describe() {
        let a = authorizer(&[
            acl(TOPIC, "*", LITERAL, "User:*", ALL, ALLOW),
            acl(TOPIC, "secret", LITERAL, "User:bob", READ, DENY),
            acl(TOPIC, "audit", LITERAL, "User:carol", WRITE, ALLOW),
            acl(TOPIC, "audit", LITERAL, "User:carol", ALTER_CONFIGS, ALLOW),
        ]);
        let bob = who("bob");
        assert!(!a.authorize(&bob, READ, TOPIC, "secret"));
        assert!(a.authorize(&bob, DESCRIBE, TOPIC, "secret"));
        assert!(a.authorize(&bob, WRITE, TOPIC, "secret"));
        let carol = who("carol");
        let ops = a.operations(&carol, TOPIC, "audit");
        assert_ne!(ops & (1 << DESCRIBE), 0);
        assert_ne!(ops & (1 << DESCRIBE_CONFIGS), 0);
        let only = authorizer(&[acl(TOPIC, "audit", LITERAL, "User:carol", WRITE, ALLOW)]);
        assert_eq!(
            only.operations(&carol, TOPIC, "audit"),
            (1 << WRITE) | (1 << DESCRIBE)
        );
    }

    #[test]
    fn hosts_must_match_unless_the_acl_says_any() {
        let mut from_one = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
        from_one.host = "10.0.0.1".into();
        let a = authorizer(&[from_one]);
        assert!(!a.authorize(&who("alice"), READ, TOPIC, "t"));
        let there = Requester {
            host: "10.0.0.1".into(),
            ..who("alice")
        };
        assert!(a.authorize(&there, READ, TOPIC, "t"));
    }

    #[test]
    fn by_resource_type_an_allow_counts_unless_a_deny_covers_it() {
        let alice = who("alice");
        let a = authorizer(&[acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW)]);
        assert!(a.authorize_any(&alice, WRITE, TOPIC));
        assert!(!a.authorize_any(&who("bob"), WRITE, TOPIC));
        let denied = authorizer(&[
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "ord", PREFIXED, "User:alice", WRITE, DENY),
        ]);
        assert!(!denied.authorize_any(&alice, WRITE, TOPIC));
        let everywhere = authorizer(&[
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "*", LITERAL, "User:*", WRITE, DENY),
        ]);
        assert!(!everywhere.authorize_any(&alice, WRITE, TOPIC));
    }

    #[test]
    fn each_check_is_counted_once_and_descriptions_not_at_all() {
        let alice = who("alice");
        let a = authorizer(&[acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW)]);
        assert!(a.authorize(&alice, WRITE, TOPIC, "orders"));
        assert!(!a.authorize(&alice, READ, TOPIC, "orders"));
        assert!(!a.authorize(&who("bob"), WRITE, TOPIC, "orders"));
        assert_eq!(a.decisions(), (1, 2));
        assert!(a.authorize_any(&alice, WRITE, TOPIC));
        assert!(!a.authorize_any(&alice, READ, GROUP));
        assert_eq!(a.decisions(), (2, 3));
        assert_ne!(a.operations(&alice, TOPIC, "orders"), 0);
        assert_eq!(a.decisions(), (2, 3));
    }

    #[test]
    fn filters_match_as_kafkas_and_delete_what_they_match() {
        let a = authorizer(&[
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "ord", PREFIXED, "User:bob", READ, ALLOW),
            acl(TOPIC, "*", LITERAL, "User:carol", READ, ALLOW),
            acl(GROUP, "g", LITERAL, "User:alice", READ, ALLOW),
        ]);
        let any = AclFilter {
            resource_type: ANY,
            name: None,
            pattern: ANY,
            principal: None,
            host: None,
            operation: ANY,
            permission: ANY,
        };
        assert_eq!(a.describe(&any).len(), 4);
        let applying = AclFilter {
            resource_type: TOPIC,
            name: Some("orders".into()),
            pattern: MATCH,
            ..any.clone()
        };
        assert_eq!(a.describe(&applying).len(), 3);
        let exact = AclFilter {
            pattern: LITERAL,
            ..applying.clone()
        };
        assert_eq!(a.describe(&exact).len(), 1);
        let alices = AclFilter {
            principal: Some("User:alice".into()),
            ..any.clone()
        };
        assert_eq!(a.delete(&alices).len(), 2);
        assert_eq!(a.describe(&any).len(), 2);
        assert!(a
            .create(acl(ANY, "x", LITERAL, "User:a", READ, ALLOW))
            .is_err());
        assert!(a
            .create(acl(TOPIC, "x", MATCH, "User:a", READ, ALLOW))
            .is_err());
        assert!(a
            .create(acl(TOPIC, "x", LITERAL, "alice", READ, ALLOW))
            .is_err());
        assert!(a
            .create(acl(TOPIC, "", LITERAL, "User:a", READ, ALLOW))
            .is_err());
        assert!(AclFilter {
            operation: 0,
            ..any
        }
        .validate()
        .is_err());
    }
}
