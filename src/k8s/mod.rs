//! Kubernetes building blocks shared by the sandbox server and the controller engine.

pub mod names;
pub mod selector;
