//! Feature flags (KIP-584): the levels the served brokers support, the
//! levels finalized for the cluster, which ApiVersions announces, and
//! UpdateFeatures, with the checks of Kafka's controller
//! (`FeatureControlManager`).
//!
//! Two features are known here. `metadata.version` is fixed at 22
//! (4.0-IV0, Kafka 4.0's production level, whose brokers' rules this
//! front follows); there is no metadata log to upgrade or downgrade. `group.version` 1 turns the
//! consumer group protocol (KIP-848) on, as in Kafka 4.0, and 0 turns it
//! off: ConsumerGroupHeartbeat and ConsumerGroupDescribe are then answered
//! UNSUPPORTED_VERSION, as Kafka's brokers answer them. Kafka's other
//! features are not supported here: `kraft.version` (no KRaft quorum
//! runs), `transaction.version` (the second version of transactions is not
//! built) and `eligible.leader.replicas.version`.

use super::service::BrokerService;
use crate::wire::Features;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{
    ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, RequestKind, ResponseKind,
    UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// The metadata log's format, fixed here.
pub const METADATA_VERSION: &str = "metadata.version";
/// The group coordinator's protocols: 1 adds the consumer group protocol.
pub const GROUP_VERSION: &str = "group.version";
/// 4.0-IV0, Kafka 4.0's production metadata version.
const METADATA_LEVEL: i16 = 22;

/// Each feature the brokers support, with the lowest and highest level.
pub const SUPPORTED: [(&str, i16, i16); 2] = [
    (METADATA_VERSION, METADATA_LEVEL, METADATA_LEVEL),
    (GROUP_VERSION, 0, 1),
];

/// How an update may move a level (UpdateFeatures' `UpgradeType`).
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// The finalized levels and the epoch of their last change.
#[derive(Debug)]
pub struct FeatureLevels {
    state: Mutex<(BTreeMap<&'static str, i16>, i64)>,
}

impl Default for FeatureLevels {
    /// A new cluster's levels, as Kafka 4.0 formats one: every supported
    /// feature at its highest level.
    fn default() -> Self {
        let levels = SUPPORTED.iter().map(|&(name, _, hi)| (name, hi)).collect();
        FeatureLevels {
            state: Mutex::new((levels, 0)),
        }
    }
}

impl FeatureLevels {
    /// The finalized level of `feature` (0 if it is off or unknown).
    pub fn level(&self, feature: &str) -> i16 {
        self.state.lock().0.get(feature).copied().unwrap_or(0)
    }

    /// Whether the consumer group protocol is on.
    pub fn consumer_protocol(&self) -> bool {
        self.level(GROUP_VERSION) >= 1
    }

    /// What ApiVersions announces.
    pub fn announced(&self) -> Features {
        let state = self.state.lock();
        Features {
            supported: (SUPPORTED.iter())
                .map(|&(name, lo, hi)| (name.to_string(), lo, hi))
                .collect(),
            finalized: (state.0.iter())
                .map(|(&name, &level)| (name.to_string(), level))
                .collect(),
            epoch: state.1,
        }
    }

    /// Applies the request's updates if every one passes Kafka's checks,
    /// or none of them: the first refused names the error for the whole
    /// request (INVALID_UPDATE_VERSION), as Kafka's controller answers.
    /// `controller` is the node named as the controller, for the
    /// messages. From v2 the answer has no result per feature. A v0
    /// request's `allow_downgrade` is ignored, as Kafka's controller
    /// ignores it: v0 only upgrades.
    pub fn update(
        &self,
        r: &UpdateFeaturesRequest,
        version: i16,
        controller: u32,
    ) -> UpdateFeaturesResponse {
        let mut response = UpdateFeaturesResponse::default();
        let mut state = self.state.lock();
        let mut proposed = state.0.clone();
        for u in &r.feature_updates {
            let name = u.feature.as_str();
            match check(
                name,
                u.max_version_level,
                u.upgrade_type,
                &state.0,
                controller,
            ) {
                Ok(known) => {
                    if u.max_version_level == 0 {
                        proposed.remove(known);
                    } else {
                        proposed.insert(known, u.max_version_level);
                    }
                }
                Err(why) => {
                    response.error_code = ResponseError::InvalidUpdateVersion.code();
                    response.error_message = Some(StrBytes::from_string(format!(
                        "The update failed for all features since the following feature \
                         had an error: Invalid update version {} for feature {name}. {why}",
                        u.max_version_level
                    )));
                    return response;
                }
            }
        }
        if !r.validate_only && proposed != state.0 {
            state.0 = proposed;
            state.1 += 1;
        }
        response.error_message = None;
        if version <= 1 {
            response.results = (r.feature_updates.iter())
                .map(|u| {
                    let mut result = UpdatableFeatureResult::default();
                    result.feature = u.feature.clone();
                    result.error_message = None;
                    result
                })
                .collect();
        }
        response
    }
}

/// Kafka's checks of one update against the current levels, in its
/// order; the feature's name as known here, or why it is refused.
fn check(
    name: &str,
    level: i16,
    upgrade: i8,
    current: &BTreeMap<&'static str, i16>,
    controller: u32,
) -> Result<&'static str, String> {
    if ![UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE].contains(&upgrade) {
        return Err("The controller does not support the given upgrade type.".into());
    }
    if level < 0 {
        return Err("A feature version cannot be less than 0.".into());
    }
    // An unknown feature is supported at level 0 only, as Kafka's
    // controller reads it ("disabled").
    let supported = SUPPORTED.iter().find(|s| s.0 == name);
    let (lo, hi) = supported.map_or((0, 0), |&(_, lo, hi)| (lo, hi));
    if !(lo..=hi).contains(&level) {
        return Err(if hi == 0 {
            format!("Local controller {controller} does not support this feature.")
        } else if lo == hi {
            format!("Local controller {controller} only supports versions {lo}")
        } else {
            format!("Local controller {controller} only supports versions {lo}-{hi}")
        });
    }
    let now = current.get(name).copied().unwrap_or(0);
    if level < now && upgrade == UPGRADE {
        return Err(
            "Can't downgrade the version of this feature without setting the \
                    upgrade type to either safe or unsafe downgrade."
                .into(),
        );
    }
    if level > now && upgrade != UPGRADE {
        return Err("Can't downgrade to a newer version.".into());
    }
    supported
        .map(|&(known, _, _)| known)
        .ok_or_else(|| format!("Feature {name} not found."))
}

impl BrokerService {
    /// The answer to a consumer group protocol request while
    /// `group.version` is 0: UNSUPPORTED_VERSION, as Kafka's brokers
    /// answer it, for the heartbeat and for each group described.
    pub(crate) fn consumer_protocol_off(&self, request: &RequestKind) -> Option<ResponseKind> {
        let unsupported = ResponseError::UnsupportedVersion.code();
        // Other requests pass without reading the levels.
        let on = || self.cluster.features.consumer_protocol();
        match request {
            RequestKind::ConsumerGroupHeartbeat(_) | RequestKind::ConsumerGroupDescribe(_)
                if on() =>
            {
                None
            }
            RequestKind::ConsumerGroupHeartbeat(_) => {
                let mut response = ConsumerGroupHeartbeatResponse::default();
                response.error_code = unsupported;
                response.error_message = None;
                Some(ResponseKind::ConsumerGroupHeartbeat(response))
            }
            RequestKind::ConsumerGroupDescribe(r) => {
                let mut response = ConsumerGroupDescribeResponse::default();
                response.groups = (r.group_ids.iter())
                    .map(|id| {
                        let mut group = DescribedGroup::default();
                        group.group_id = id.clone();
                        group.error_code = unsupported;
                        group.error_message = None;
                        group
                    })
                    .collect();
                Some(ResponseKind::ConsumerGroupDescribe(response))
            }
            _ => None,
        }
    }

    /// UpdateFeatures, answered as the controller answers it.
    pub(crate) fn update_features(
        &self,
        r: &UpdateFeaturesRequest,
        version: i16,
    ) -> UpdateFeaturesResponse {
        let controller = self.cluster.controller().unwrap_or(self.id);
        self.cluster.features.update(r, version, controller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;

    fn request(updates: &[(&str, i16, i8)], validate_only: bool) -> UpdateFeaturesRequest {
        let mut r = UpdateFeaturesRequest::default();
        r.validate_only = validate_only;
        r.feature_updates = (updates.iter())
            .map(|&(name, level, upgrade)| {
                let mut u = FeatureUpdateKey::default();
                u.feature = StrBytes::from_string(name.to_string());
                u.max_version_level = level;
                u.upgrade_type = upgrade;
                u
            })
            .collect();
        r
    }

    fn message(r: &UpdateFeaturesResponse) -> &str {
        r.error_message.as_deref().unwrap_or_default()
    }

    #[test]
    fn a_new_cluster_runs_every_feature_at_its_highest_level() {
        let f = FeatureLevels::default();
        assert_eq!(f.level(METADATA_VERSION), 22);
        assert!(f.consumer_protocol());
        let a = f.announced();
        assert_eq!(
            a.finalized,
            vec![("group.version".into(), 1), ("metadata.version".into(), 22)]
        );
        assert_eq!(a.epoch, 0);
    }

    #[test]
    fn the_group_version_goes_down_and_up_again_with_the_right_upgrade_type() {
        let f = FeatureLevels::default();
        // Down without saying so: refused, nothing changes.
        let r = f.update(&request(&[(GROUP_VERSION, 0, UPGRADE)], false), 1, 0);
        assert_eq!(r.error_code, ResponseError::InvalidUpdateVersion.code());
        assert!(
            message(&r).contains("without setting the upgrade type"),
            "{r:?}"
        );
        assert!(r.results.is_empty());
        assert!(f.consumer_protocol());
        // A safe downgrade to 0 turns the protocol off and drops the
        // feature from the finalized ones.
        let r = f.update(&request(&[(GROUP_VERSION, 0, SAFE_DOWNGRADE)], false), 1, 0);
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.results.len(), 1);
        assert!(!f.consumer_protocol());
        let a = f.announced();
        assert_eq!(a.finalized, vec![("metadata.version".into(), 22)]);
        assert_eq!(a.epoch, 1);
        // Up with a downgrade type: refused.
        let r = f.update(&request(&[(GROUP_VERSION, 1, SAFE_DOWNGRADE)], false), 2, 0);
        assert!(
            message(&r).contains("Can't downgrade to a newer version."),
            "{r:?}"
        );
        // An upgrade; v2 answers without results.
        let r = f.update(&request(&[(GROUP_VERSION, 1, UPGRADE)], false), 2, 0);
        assert_eq!((r.error_code, r.results.len()), (0, 0));
        assert!(f.consumer_protocol());
        assert_eq!(f.announced().epoch, 2);
    }

    #[test]
    fn one_refused_update_refuses_the_whole_request() {
        let f = FeatureLevels::default();
        let both = [
            (GROUP_VERSION, 0, SAFE_DOWNGRADE),
            (METADATA_VERSION, 21, SAFE_DOWNGRADE),
        ];
        let r = f.update(&request(&both, false), 1, 3);
        assert_eq!(r.error_code, ResponseError::InvalidUpdateVersion.code());
        assert_eq!(
            message(&r),
            "The update failed for all features since the following feature had an error: \
             Invalid update version 21 for feature metadata.version. Local controller 3 only \
             supports versions 22"
        );
        assert!(f.consumer_protocol());
    }

    #[test]
    fn validate_only_changes_nothing() {
        let f = FeatureLevels::default();
        let r = f.update(&request(&[(GROUP_VERSION, 0, SAFE_DOWNGRADE)], true), 1, 0);
        assert_eq!(r.error_code, 0);
        assert!(f.consumer_protocol());
        assert_eq!(f.announced().epoch, 0);
    }

    #[test]
    fn unknown_features_and_levels_are_refused_as_kafka_refuses_them() {
        let f = FeatureLevels::default();
        let refused = |name, level, upgrade| {
            let r = f.update(&request(&[(name, level, upgrade)], false), 1, 0);
            assert_eq!(r.error_code, ResponseError::InvalidUpdateVersion.code());
            message(&r).rsplit(". ").next().unwrap().to_string()
        };
        assert_eq!(
            refused("transaction.version", 2, UPGRADE),
            "Local controller 0 does not support this feature."
        );
        assert_eq!(refused("no.such", 0, UPGRADE), "Feature no.such not found.");
        assert_eq!(
            refused(GROUP_VERSION, 2, UPGRADE),
            "Local controller 0 only supports versions 0-1"
        );
        assert!(refused(GROUP_VERSION, -1, SAFE_DOWNGRADE).contains("cannot be less than 0"));
        assert!(refused(GROUP_VERSION, 0, 7).contains("does not support the given upgrade type"));
    }
}
