//! The label and annotation vocabulary: every label and annotation key the engine writes on
//! objects or reads from them, in one place, for tools that look at what it left behind
//! (`kubectl meta inspect`, `deploy`, renderers). Each is defined beside the code that writes it;
//! this module names them together.
//!
//! | key | on | written by |
//! |---|---|---|
//! | [`CONTROLLER_UID_LABEL`] | children of a `generateSelector` CompositeController | the planner |
//! | [`LAST_APPLIED`] | every child and attachment | the three-way merge |
//! | [`DECORATOR_ANNOTATION`] | targets of a DecoratorController | the decorator |
//! | [`MAP_KEY_LABEL`], [`MAP_INPUT_ANNOTATION`] | outputs of a MapController | the map planner |
//! | [`TAKEOVER_BY`], [`TAKEOVER_AT`], [`TAKEOVER_SECONDS`] | a dev loop's Lease | `dev --takeover` |
//!
//! And the field manager of every write ([`FIELD_MANAGER`]).

pub use crate::k8s::FIELD_MANAGER;
pub use crate::k8s::lease::{TAKEOVER_AT, TAKEOVER_BY, TAKEOVER_SECONDS};
pub use crate::kinds::decorator::DECORATOR_ANNOTATION;
pub use crate::plan::apply::LAST_APPLIED;
pub use crate::plan::map_plan::{MAP_INPUT_ANNOTATION, MAP_KEY_LABEL};
pub use crate::plan::ownership::CONTROLLER_UID_LABEL;
