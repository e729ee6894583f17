//! The book's command-line reference (`docs/reference/cli.md`), generated from the
//! command's clap definition and checked fresh by a test.
//!
//! `cargo test -p flemma-cli cli_reference` fails when the committed page differs from what the
//! definition renders; `FLEMMA_UPDATE_DOCS=1` writes it instead. The page is rendered with the
//! default features (every command): the module is compiled for tests only when they are on.

use std::fmt::Write as _;

/// The page: a section per command, depth first, in the order `flemma --help` lists them.
pub(crate) fn render(command: &clap::Command) -> String {
    let mut page = String::from(
        "# Command-line reference\n\n\
         <!-- Generated from the `flemma` command's definition (flemma-cli/src) by \
         `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma-cli cli_reference`; do not edit by hand. -->\n\n\
         Every command of `flemma`, with its arguments as `flemma COMMAND --help` shows them. \
         `--config`, `--set` and `-v` are accepted by every command. Exit codes: 0 success, 1 \
         the file has problems or the command failed, 2 usage or I/O error; `flemma run` has \
         its own (below).\n",
    );
    let mut command = command.clone();
    command.build();
    section(&mut page, &command, &mut Vec::new());
    page
}

fn section(page: &mut String, command: &clap::Command, path: &mut Vec<String>) {
    path.push(command.get_name().to_owned());
    let name = path.join(" ");
    let _ = write!(page, "\n## `{name}`\n\n");
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        let _ = writeln!(page, "{}\n", escape_text(&about.to_string()));
    }
    let usage = command
        .clone()
        .bin_name(name.clone())
        .render_usage()
        .to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    let _ = writeln!(page, "```text\n{usage}\n```");
    let positionals: Vec<_> = command
        .get_arguments()
        .filter(|arg| arg.is_positional() && !arg.is_hide_set())
        .collect();
    let options: Vec<_> = command
        .get_arguments()
        .filter(|arg| !arg.is_positional() && !arg.is_hide_set())
        .collect();
    if !positionals.is_empty() {
        page.push_str("\nArguments:\n\n");
        for arg in positionals {
            argument(page, arg);
        }
    }
    if !options.is_empty() {
        page.push_str("\nOptions:\n\n");
        for arg in options {
            argument(page, arg);
        }
    }
    for sub in command.get_subcommands() {
        if sub.get_name() != "help" && !sub.is_hide_set() {
            section(page, sub, path);
        }
    }
    path.pop();
}

fn argument(page: &mut String, arg: &clap::Arg) {
    let values = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|name| format!("<{name}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let mut form = match (arg.get_short(), arg.get_long()) {
        (_, None) => values.clone(),
        (Some(short), Some(long)) => format!("-{short}, --{long}"),
        (None, Some(long)) => format!("--{long}"),
    };
    if arg.get_long().is_some() && takes_value && !values.is_empty() {
        let _ = write!(form, " {values}");
    }
    if form.is_empty() {
        form = format!("<{}>", arg.get_id().as_str().to_uppercase());
    }
    let _ = write!(page, "- `{form}`");
    if let Some(help) = arg.get_long_help().or(arg.get_help()) {
        let text = escape_text(&help.to_string()).replace("\n\n", "\n\n  ");
        let _ = write!(page, ": {text}");
        if !text.ends_with(['.', ')', ':', '!', '?']) {
            page.push('.');
        }
    }
    let choices: Vec<_> = arg
        .get_possible_values()
        .into_iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| format!("`{}`", value.get_name()))
        .collect();
    if takes_value && !choices.is_empty() {
        let _ = write!(page, " One of {}.", choices.join(", "));
    }
    let defaults: Vec<_> = arg
        .get_default_values()
        .iter()
        .map(|value| format!("`{}`", value.to_string_lossy()))
        .collect();
    if !defaults.is_empty() {
        let _ = write!(page, " Default: {}.", defaults.join(", "));
    }
    page.push('\n');
}

/// Help text as Markdown: angle brackets outside code spans would be read as HTML.
fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.trim_end().chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn cli_reference_is_fresh() -> Result<(), Box<dyn std::error::Error>> {
        let page = super::render(&crate::command());
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/cli.md");
        if std::env::var_os("FLEMMA_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &page)?;
            return Ok(());
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{} is stale: run `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma-cli cli_reference` and \
             commit it",
            path.display()
        );
        Ok(())
    }

    #[test]
    fn every_command_and_option_has_its_entry() {
        let page = super::render(&crate::command());
        for needle in [
            "## `flemma run`",
            "## `flemma mcp serve`",
            "## `flemma approval explain`",
            "- `--max-turns <N>`",
            "- `--config <PATH>`",
        ] {
            assert!(page.contains(needle), "missing {needle}");
        }
        assert!(!page.contains("## `flemma help`"));
    }
}
