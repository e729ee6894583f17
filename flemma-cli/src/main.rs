//! The `flemma` command: the reference application of the SDK and its black-box test surface.
//!
//! Exit codes: 0 success, 1 the file has problems (`check`, `fmt --check`) or the command
//! failed, 2 usage or I/O error. Errors go to stderr as one line naming the file.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod input;
mod render;

use input::Input;

/// Parse, check and format `.chat` transcripts.
#[derive(Debug, Parser)]
#[command(name = "flemma", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the parsed transcript (`-` reads standard input).
    Parse {
        /// The `.chat` file.
        file: String,
        /// Print the AST as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Report diagnostics; exit 1 when there are any.
    Check {
        /// The `.chat` file.
        file: String,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite the file in canonical form (`-` prints the result to standard output).
    Fmt {
        /// The `.chat` file.
        file: String,
        /// Change nothing; exit 1 when the file is not in canonical form.
        #[arg(long)]
        check: bool,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl From<input::InputError> for Failure {
    fn from(error: input::InputError) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            let _ = writeln!(std::io::stderr(), "flemma: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}

fn run(command: Command) -> Result<u8, Failure> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Parse { file, json } => {
            let input = Input::read(&file)?;
            let doc = flemma::ast::parse(&input.text);
            if json {
                render::json(&mut out, &doc)?;
            } else {
                render::tree(&mut out, &doc)?;
            }
            Ok(0)
        }
        Command::Check { file, json } => {
            let input = Input::read(&file)?;
            let doc = flemma::ast::parse(&input.text);
            if json {
                render::json(
                    &mut out,
                    &serde_json::json!({ "file": input.name, "diagnostics": doc.diagnostics }),
                )?;
            } else {
                for d in &doc.diagnostics {
                    writeln!(
                        out,
                        "{}:{}: {}: {}: {}",
                        input.name,
                        d.line,
                        d.severity.as_str(),
                        d.kind.as_str(),
                        d.message
                    )?;
                }
            }
            Ok(u8::from(!doc.diagnostics.is_empty()))
        }
        Command::Fmt { file, check, json } => {
            let input = Input::read(&file)?;
            let formatted =
                input.with_line_ending(&flemma::ast::print(&flemma::ast::parse(&input.text)));
            let changed = formatted != input.text;
            if json {
                render::json(
                    &mut out,
                    &serde_json::json!({ "file": input.name, "changed": changed }),
                )?;
            }
            if check {
                if changed && !json {
                    writeln!(out, "{}: not in canonical form", input.name)?;
                }
                return Ok(u8::from(changed));
            }
            if input.is_stdin() {
                if !json {
                    out.write_all(formatted.as_bytes())?;
                }
            } else if changed {
                input.write_back(&formatted)?;
            }
            Ok(0)
        }
    }
}
