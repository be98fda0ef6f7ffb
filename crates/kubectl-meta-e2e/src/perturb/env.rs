//! The environment's side of a schedule: the [`Perturbation`] a run's engine gets, and the
//! handles its environment answers (what the e2e runner's `EnvExtras` carries: the engine
//! options, the sandbox's fault rules, the restart signals).

use std::sync::{Arc, OnceLock};

use kube_sandbox::faults::{Fault, FaultInjector};
use tokio::sync::Notify;

use super::Schedule;
use kubectl_meta_engine::perturb::{ArmedFault, Perturbation};

/// One run's perturbation and the handles its environment serves.
#[derive(Clone)]
pub struct Perturbed {
    /// Set as `EngineOptions::perturb` before every engine start (first start and restarts).
    pub perturbation: Arc<Perturbation>,
    /// Notified when the engine is to be killed and started again on fresh caches
    /// (`EnvExtras.restart`).
    pub restart: Arc<Notify>,
    /// Notified when the hook server is to be restarted (`EnvExtras.restart_hook_server`).
    pub restart_hook_server: Arc<Notify>,
    /// The sandbox's fault rules, set once the sandbox started (`EnvExtras.on_sandbox`):
    /// `conflict` and `throttle` arm one-shot rules there (real HTTP answers). Without a
    /// sandbox (`--context`) nothing is armed.
    pub faults: Arc<OnceLock<FaultInjector>>,
}

impl Perturbed {
    /// The perturbation of `schedule` with fresh handles.
    pub fn new(schedule: Schedule) -> Perturbed {
        let restart = Arc::new(Notify::new());
        let restart_hook_server = Arc::new(Notify::new());
        let faults: Arc<OnceLock<FaultInjector>> = Arc::default();
        let armed = Arc::clone(&faults);
        let perturbation = Perturbation::new(schedule)
            .with_restart(Arc::clone(&restart))
            .with_hook_restart(Arc::clone(&restart_hook_server))
            .with_arm(Arc::new(move |f: ArmedFault| {
                if let Some(faults) = armed.get() {
                    faults.inject(rule(&f));
                }
            }));
        Perturbed {
            perturbation: Arc::new(perturbation),
            restart,
            restart_hook_server,
            faults,
        }
    }

    /// Give the sandbox's fault rules (call once the sandbox started).
    pub fn on_sandbox(&self, faults: &FaultInjector) {
        let _ = self.faults.set(faults.clone());
    }
}

/// The sandbox rule of an armed fault: any method, the path, the code (429 with
/// `Retry-After: 0`), `times` requests.
fn rule(f: &ArmedFault) -> Fault {
    let r = Fault::on("*", &f.path_contains);
    let r = if f.code == 429 {
        r.too_many_requests(0)
    } else {
        r.status(f.code)
    };
    r.times(f.times as usize)
}
