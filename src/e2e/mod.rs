//! End-to-end tests of whole controllers (issue 38). The chainsaw runner (`run_test`,
//! `EnvExtras`, `TestRun`) lives beside this at merge; [`perturb`] drives any run under the
//! perturbation classes.

pub mod perturb;
