//! Pieces of Kubernetes' `k8s.io/apimachinery`, in Rust, exactly: the same grammars, the same
//! canonical forms and the same error messages kube-apiserver prints.
//!
//! - [`selector`]: label selectors (`app=web,tier notin (db)`, `metav1.LabelSelector`'s
//!   `matchLabels`/`matchExpressions`) and field selectors, parsed and matched.
//! - [`quantity`]: resource quantities (`500m`, `1Gi`, `1e9`) parsed, compared and printed as
//!   `resource.Quantity` does, with exact decimal arithmetic.
//! - [`names`]: the validators for object names, label keys and values (DNS-1123, DNS-1035,
//!   qualified names) with apimachinery's messages, and Go's `strconv.Quote`.
//! - [`hash`]: a key-order-independent content hash of JSON values.
//!
//! Pure functions on strings and `serde_json::Value`s: no I/O, no async, no client. Both the
//! `kube-sandbox` API server and the `kubectl-meta` engine use them, so what the engine
//! compares and what the server stores agree.

pub mod hash;
pub mod names;
pub mod quantity;
pub mod selector;
