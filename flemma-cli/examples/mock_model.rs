//! The `run` bench's mock model server on its own, for timing or profiling `flemma run` by
//! hand (`strace`, `valgrind`):
//!
//! ```text
//! cargo run -p flemma-cli --release --example mock_model -- 20 30
//! FLEMMA_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=x flemma run FILE --provider anthropic
//! ```
//!
//! The first argument is the number of tool turns (`bash` with `echo hi`) before the final
//! text (default 20), the second how many seconds without a request it waits before it stops
//! (default 30). It prints its base URL on stdout.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    reason = "a command-line helper"
)]

#[path = "../benches/support/mock_model.rs"]
mod mock_model;

use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let turns = args.next().map_or(Ok(20), |n| n.parse());
    let idle = args.next().map_or(Ok(30), |n| n.parse());
    let (Ok(turns), Ok(idle)) = (turns, idle) else {
        eprintln!("usage: mock_model [TURNS] [IDLE_SECONDS]");
        std::process::exit(2);
    };
    match mock_model::MockModel::start(turns) {
        Ok(server) => {
            println!("{}", server.base_url());
            server.serve_until_idle(Duration::from_secs(idle));
        }
        Err(error) => {
            eprintln!("mock_model: cannot listen: {error}");
            std::process::exit(1);
        }
    }
}
