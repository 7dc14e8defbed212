//! An ongoing transaction's timeout (`transaction.timeout.ms`) as a
//! delayed operation: parked when the transaction starts, completed by
//! force when the producer ends it, and on expiry it has the coordinator
//! abort the transaction and fence the producer, as Kafka's coordinator
//! does with transactions that outlive their timeout.

use crate::live::checks::Checks;
use crate::live::LiveCluster;
use purgatory::{DelayedOperation, Outcome};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One transaction's timeout, watched under its transactional id.
pub struct TxnExpiry {
    pub cluster: Weak<LiveCluster>,
    pub transactional_id: Arc<str>,
    /// Which of the id's transactions it times (a later one has its own).
    pub number: u64,
    pub timeout: Duration,
    pub checks: Arc<Checks>,
    pub answered: bool,
}

impl DelayedOperation for TxnExpiry {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Only the producer's EndTxn (a forced completion) or the timeout
    /// ends it.
    fn try_complete(&mut self) -> bool {
        false
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.answered);
        self.answered = true;
        if outcome != Outcome::Expired {
            return;
        }
        if let Some(cluster) = self.cluster.upgrade() {
            cluster.txn_timed_out(&self.transactional_id, self.number);
        }
    }
}
