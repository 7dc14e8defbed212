//! Running the `broker-sim` binary as a user would.

use std::process::Command;

/// Runs `broker-sim` with `args`: exit status, stdout, stderr.
pub fn sim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_broker-sim"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
