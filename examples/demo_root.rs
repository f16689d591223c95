//! Lays out a fake 8-CPU board under a directory, for trying `cgwarden plan`
//! and `apply` safely with `--root`:
//!
//! ```text
//! cargo run --example demo_root -- /tmp/cgw-demo
//! cargo run --release -- plan policies/iq9100-vision.yaml --root /tmp/cgw-demo
//! ```

use cgwarden::testing::{FakeProcess, FakeTree};
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: demo_root DIR");
        return ExitCode::from(2);
    };
    match build(&dir) {
        Ok(()) => {
            println!("fake board laid out in {dir}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("demo_root: {dir}: {e}");
            ExitCode::from(1)
        }
    }
}

fn build(dir: &str) -> std::io::Result<()> {
    let t = FakeTree::standard(dir)?;
    t.add_process(&FakeProcess::new(1, "systemd"))?;
    t.add_process(&FakeProcess::new(412, "motion_control"))?;
    t.add_process(&FakeProcess {
        exe: Some("/opt/npu/bin/infer-server".into()),
        cmdline: vec![
            "/opt/npu/bin/infer-server".into(),
            "--model".into(),
            "yolov8n".into(),
        ],
        ..FakeProcess::new(530, "infer-server")
    })?;
    t.add_process(&FakeProcess {
        exe: Some("/usr/bin/python3.11".into()),
        cmdline: vec!["python3".into(), "/opt/vision/camera_pipeline.py".into()],
        uid: 1001,
        ..FakeProcess::new(610, "python3")
    })?;
    t.add_process(&FakeProcess::new(702, "sshd"))?;
    Ok(())
}
