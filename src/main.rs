//! The `kubectl-meta` binary: everything is in the library ([`kubectl_meta::main`]), so the
//! program and its tests share one build of it.

/// mimalloc instead of glibc's malloc: the engine, its informers and the sandbox allocate and
/// free small JSON values on every thread, and glibc's arenas contended on their locks (a
/// fifth of the CPU time of a 1,000-parent start-up, `cargo bench --bench engine` under
/// `perf`). The benches declare the same allocator, so they measure what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kubectl_meta::main()
}
