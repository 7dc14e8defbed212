//! Whom the served listeners authenticate: with `--sasl-user`, the users
//! given there by PLAIN, and every user with a SCRAM credential by
//! SCRAM-SHA-256 and SCRAM-SHA-512 (`wire/sasl.rs` runs the exchanges).

use super::service::BrokerService;
use super::LiveCluster;
use crate::wire::sasl::{Credentials, Mechanism, ScramSecret};
use std::sync::Arc;
use subtle::ConstantTimeEq;

impl Credentials for LiveCluster {
    fn plain(&self, user: &str, password: &str) -> bool {
        // Compared in constant time, as Kafka's PLAIN server compares.
        (self.cfg.sasl_users.get(user))
            .is_some_and(|expected| bool::from(expected.as_bytes().ct_eq(password.as_bytes())))
    }

    fn scram(&self, mechanism: Mechanism, user: &str) -> Option<ScramSecret> {
        self.scram.secret(mechanism, user)
    }

    fn session_lifetime(&self) -> Option<std::time::Duration> {
        self.cfg.sasl_reauth
    }
}

impl BrokerService {
    /// The cluster's credentials where its listeners are SASL ones.
    pub(crate) fn sasl_credentials(&self) -> Option<Arc<dyn Credentials>> {
        if self.cluster.cfg.sasl_users.is_empty() {
            return None;
        }
        Some(Arc::clone(&self.cluster) as Arc<dyn Credentials>)
    }
}
