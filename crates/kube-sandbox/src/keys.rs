//! Storage keys (`group/resource`, the core group empty) of the kinds that more than one part of
//! the sandbox reads by name: the `kubernetes` Service's objects, which the apiserver controller
//! keeps ([`crate::controllers::apiserver`]) and the webhook caller resolves Services through
//! ([`crate::webhook`]).

/// Services.
pub const SERVICES: &str = "/services";
/// Endpoints.
pub const ENDPOINTS: &str = "/endpoints";
/// EndpointSlices.
pub const SLICES: &str = "discovery.k8s.io/endpointslices";
