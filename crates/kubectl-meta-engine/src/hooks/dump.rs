//! `dev --dump-requests DIR`: every hook call written to files, so a developer can replay one
//! (`curl -d @FILE.request.json URL`, `python3 hook.py < FILE.request.json`) or turn it into a
//! unit test of the hook.
//!
//! Layout: `DIR/<controller>/<parent>/<UTC time>-<seq>-<hook>.request.json`, beside it
//! `.response.json` (the answer as received), `.stderr.txt` (an exec hook's stderr) and
//! `.error.txt` (why the call failed), each only when there is something to write. `<parent>`
//! is `namespace_name` (`/` and spaces become `_`); `<seq>` orders calls within a millisecond.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::{CallInfo, HookCall};

/// Calls written so far by this process (part of each file name).
static SEQ: AtomicU64 = AtomicU64::new(0);

/// A path component from `s`: `/`, `\` and whitespace become `_`; empty becomes `_`.
pub(crate) fn component(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if out.is_empty() || out == "." || out == ".." {
        "_".into()
    } else {
        out
    }
}

/// Write one call's files under `dir`; returns the common path prefix (without extension).
pub fn dump(
    dir: &Path,
    info: &CallInfo,
    request: &Value,
    call: &HookCall,
) -> std::io::Result<PathBuf> {
    let folder = dir
        .join(component(&info.controller))
        .join(component(&info.label()));
    std::fs::create_dir_all(&folder)?;
    let time = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%S%.3fZ");
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let base = folder.join(format!("{time}-{seq:06}-{}", component(&info.hook)));
    let with = |ext: &str| {
        let mut p = base.clone().into_os_string();
        p.push(ext);
        PathBuf::from(p)
    };
    let mut text = serde_json::to_string_pretty(request).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(with(".request.json"), text)?;
    if let Some(raw) = &call.raw_response {
        std::fs::write(with(".response.json"), raw)?;
    }
    if !call.stderr.is_empty() {
        std::fs::write(with(".stderr.txt"), &call.stderr)?;
    }
    if let Err(e) = &call.result {
        std::fs::write(with(".error.txt"), format!("{e}\n"))?;
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn a_call_becomes_request_response_and_stderr_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = CallInfo {
            hook: "sync".into(),
            controller_kind: "CompositeController".into(),
            controller: "hello".into(),
            parent: "default/world".into(),
            map_key: None,
        };
        let call = HookCall {
            result: Ok(json!({"children": []})),
            status: None,
            latency: Duration::from_millis(3),
            stderr: "debug\n".into(),
            raw_response: Some("{\"children\": []}".into()),
        };
        let base = dump(dir.path(), &info, &json!({"parent": {"x": 1}}), &call).expect("dump");
        assert!(base.starts_with(dir.path().join("hello/default_world")));
        let name = base.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with("-sync"), "{name}");
        let read = |ext: &str| std::fs::read_to_string(format!("{}{ext}", base.display()));
        let req: Value = serde_json::from_str(&read(".request.json").unwrap()).unwrap();
        assert_eq!(req["parent"]["x"], 1);
        assert_eq!(read(".response.json").unwrap(), "{\"children\": []}");
        assert_eq!(read(".stderr.txt").unwrap(), "debug\n");
        assert!(read(".error.txt").is_err(), "no error file for a success");
        assert_eq!(component("../x y"), ".._x_y");
        assert_eq!(component(".."), "_");
    }
}
