//! The `kubectl-meta` binary: everything is in the library ([`kubectl_meta::main`]), so the
//! program and its tests share one build of it.

fn main() -> std::process::ExitCode {
    kubectl_meta::main()
}
