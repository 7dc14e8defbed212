//! The Kafka wire protocol in front of a broker: TCP listeners, framing,
//! request decoding and response encoding with the `kafka-protocol` crate,
//! responses in request order per connection with several requests in
//! flight, ApiVersions, TLS where the listeners are given a certificate,
//! and SASL authentication where the service asks for it. What each
//! request means is the [`Service`]'s: this module knows nothing of the
//! simulated cluster behind it.

mod authenticating;
mod bounds;
pub mod client;
mod consumer;
mod frame;
pub mod keystore;
pub mod principal_rules;
pub mod sasl;
mod server;
mod service;
pub mod tls;

pub use consumer::{
    decode_assignment, decode_subscription, encode_assignment, subscribed_topics, Subscription,
};
pub use frame::{FrameError, DEFAULT_MAX_REQUEST_BYTES};
pub use server::{serve, Limits, Listener, Stop, WireStats};
pub use service::{
    decode_request, encode_response, Answer, BadRequest, Features, Principal, Service, Throttle,
};
