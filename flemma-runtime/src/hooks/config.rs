//! Command hooks from configuration: the `[hooks]` host section of `flemma.toml`, and
//! (opt-in) the `hooks` of a project's `.claude/settings.json`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::command::{CommandHook, DEFAULT_TIMEOUT};
use super::matcher::Matcher;
use super::registration::{DEFAULT_HOOK_PRIORITY, HookRegistration};
use flemma_core::hooks::HookEvent;

/// The vocabulary command hooks see tool names and inputs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compat {
    /// flemma's (`bash`, `write.path`); matchers are tool-name globs.
    #[default]
    Native,
    /// Claude Code's (`Bash`, `Write.file_path`); matchers follow Claude Code's rule.
    Claude,
}

/// Why the hooks configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookConfigError {
    /// A key or value of `[hooks]` is wrong.
    #[error("{origin}: {message}")]
    Invalid {
        /// The file (or `flemma.toml`).
        origin: String,
        /// What is wrong, with the key.
        message: String,
    },
    /// A Claude Code settings file cannot be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A Claude Code settings file is not JSON.
    #[error("{path} is not JSON")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The `[hooks]` section read: its command hooks and its own settings.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct HooksConfig {
    /// The hooks, each registered under `<Event>-<n>` unless its table names it.
    pub hooks: Vec<HookRegistration>,
    /// `hooks.compat`.
    pub compat: Compat,
}

/// The keys of `[hooks]` that are not events.
const SETTINGS: &[&str] = &["compat", "claude_settings", "allow_frontmatter"];

/// The command hooks of a configuration: `[[hooks.<Event>]]` tables of the options files
/// loaded (each file's tables added to the earlier files'), and, when `hooks.claude_settings
/// = true`, the `hooks` of `<project>/.claude/settings.json` and `settings.local.json`
/// (always in Claude Code's vocabulary).
///
/// ```toml
/// [hooks]
/// compat = "claude"          # tool names and inputs as Claude Code shows them
///
/// [[hooks.PreToolUse]]
/// matcher = "Bash"
/// command = "python3 .flemma/hooks/no-rm.py"
/// timeout = 10               # seconds (default 60)
///
/// [[hooks.PostToolUse]]      # Claude Code's nested form works too
/// matcher = "Write|Edit"
/// hooks = [{ type = "command", command = "cargo fmt" }]
/// ```
///
/// A conversation's frontmatter cannot add command hooks unless the host allows it with
/// `allow_frontmatter = true` here ([`from_frontmatter`] reads them then): a shared `.chat`
/// file must not run commands when it is opened.
///
/// # Errors
///
/// [`HookConfigError`] for the first table, key or file that is wrong.
pub fn from_config(
    config: &flemma_config::Config,
    project: Option<&Path>,
) -> Result<HooksConfig, HookConfigError> {
    let origin = config
        .section_origin("hooks")
        .map_or_else(|| "flemma.toml".to_owned(), |p| p.display().to_string());
    let mut out = HooksConfig::default();
    let Some(section) = config.section("hooks") else {
        return Ok(out);
    };
    let invalid = |message: String| HookConfigError::Invalid {
        origin: origin.clone(),
        message,
    };
    let Value::Object(section) = section else {
        return Err(invalid("`hooks` is not a table".to_owned()));
    };
    out.compat = compat_of(section, Compat::Native, &invalid)?;
    match section.get("allow_frontmatter") {
        None | Some(Value::Bool(_)) => {}
        Some(other) => {
            return Err(invalid(format!(
                "hooks.allow_frontmatter: expected true or false, got {other}"
            )));
        }
    }
    add_events(&mut out.hooks, section, out.compat, &invalid, "")?;
    match section.get("claude_settings") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            if let Some(project) = project {
                for file in ["settings.json", "settings.local.json"] {
                    let path = project.join(".claude").join(file);
                    add_claude_settings(&mut out.hooks, &path)?;
                }
            }
        }
        Some(other) => {
            return Err(invalid(format!(
                "hooks.claude_settings: expected true or false, got {other}"
            )));
        }
    }
    Ok(out)
}

/// The command hooks a conversation's frontmatter added, where the host allows it
/// ([`Config::frontmatter_hooks_allowed`](flemma_config::Config::frontmatter_hooks_allowed):
/// `[hooks] allow_frontmatter = true`, or the host's own word). Their tables are those of
/// `[[hooks.<Event>]]`; a frontmatter may set `compat` for its own hooks (else the host's
/// applies), not `claude_settings` or `allow_frontmatter`. Each hook's name starts with
/// `frontmatter:` (`frontmatter:PreToolUse-001`, `frontmatter:no-rm`), so that what it does
/// in the transcript says where it came from.
///
/// ```
/// use flemma_config::Config;
///
/// let mut config = Config::new();
/// config.allow_frontmatter_hooks(true);
/// config.apply_frontmatter(
///     "json",
///     r#"{"flemma": {"hooks": {"PreToolUse": [{"matcher": "bash", "command": "exit 0"}]}}}"#,
///     2,
/// )?;
/// let hooks = flemma_runtime::hooks::from_frontmatter(&config)?;
/// assert_eq!(hooks.hooks[0].name(), "frontmatter:PreToolUse-001");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`HookConfigError::Invalid`] (origin `frontmatter`) for the first table or key that is
/// wrong.
pub fn from_frontmatter(config: &flemma_config::Config) -> Result<HooksConfig, HookConfigError> {
    let mut out = HooksConfig::default();
    let Some(section) = config.frontmatter_hooks() else {
        return Ok(out);
    };
    let invalid = |message: String| HookConfigError::Invalid {
        origin: "frontmatter".to_owned(),
        message,
    };
    let Value::Object(section) = section else {
        return Err(invalid("`hooks` is not a table".to_owned()));
    };
    for key in ["claude_settings", "allow_frontmatter"] {
        if section.contains_key(key) {
            return Err(invalid(format!(
                "hooks.{key}: only the host's options files may set it"
            )));
        }
    }
    let host = match config.section("hooks").map(|h| h.get("compat")) {
        Some(Some(Value::String(c))) if c == "claude" => Compat::Claude,
        _ => Compat::Native,
    };
    out.compat = compat_of(section, host, &invalid)?;
    add_events(
        &mut out.hooks,
        section,
        out.compat,
        &invalid,
        "frontmatter:",
    )?;
    Ok(out)
}

/// `compat` of a `[hooks]` table; `default` when it is not written.
fn compat_of(
    section: &serde_json::Map<String, Value>,
    default: Compat,
    invalid: &dyn Fn(String) -> HookConfigError,
) -> Result<Compat, HookConfigError> {
    match section.get("compat") {
        None => Ok(default),
        Some(Value::String(c)) if c == "native" || c == "flemma" => Ok(Compat::Native),
        Some(Value::String(c)) if c == "claude" => Ok(Compat::Claude),
        Some(other) => Err(invalid(format!(
            "hooks.compat: expected \"claude\" or \"native\", got {}",
            other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_owned)
        ))),
    }
}

/// The hooks of one Claude Code settings file (none when it does not exist).
fn add_claude_settings(
    into: &mut Vec<HookRegistration>,
    path: &Path,
) -> Result<(), HookConfigError> {
    // Text of the project, not the host's: a regular file, not a link or a FIFO, 1 MiB at most.
    let text = match flemma_config::read_project_file(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(HookConfigError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let json: Value = serde_json::from_str(&text).map_err(|source| HookConfigError::Json {
        path: path.to_owned(),
        source,
    })?;
    let Some(Value::Object(hooks)) = json.get("hooks") else {
        return Ok(());
    };
    let origin = path.display().to_string();
    let invalid = |message: String| HookConfigError::Invalid {
        origin: origin.clone(),
        message,
    };
    let prefix = format!(
        "claude:{}:",
        path.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    add_events(into, hooks, Compat::Claude, &invalid, &prefix)
}

/// The hooks of each `<Event>` key of `table`.
fn add_events(
    into: &mut Vec<HookRegistration>,
    table: &serde_json::Map<String, Value>,
    compat: Compat,
    invalid: &dyn Fn(String) -> HookConfigError,
    prefix: &str,
) -> Result<(), HookConfigError> {
    for (key, entries) in table {
        if SETTINGS.contains(&key.as_str()) {
            continue;
        }
        let event: HookEvent = key.parse().map_err(|_| {
            invalid(format!(
                "hooks.{key}: not a hook event (one of {})",
                HookEvent::ALL.map(HookEvent::as_str).join(", ")
            ))
        })?;
        let Value::Array(entries) = entries else {
            return Err(invalid(format!(
                "hooks.{key}: expected an array of tables (`[[hooks.{key}]]`)"
            )));
        };
        let mut n = 0;
        for (i, entry) in entries.iter().enumerate() {
            let at = format!("hooks.{key}[{i}]");
            let Value::Object(entry) = entry else {
                return Err(invalid(format!("{at}: expected a table")));
            };
            let pattern = match entry.get("matcher") {
                None => "",
                Some(Value::String(p)) => p,
                Some(other) => {
                    return Err(invalid(format!(
                        "{at}.matcher: expected a string, got {other}"
                    )));
                }
            };
            let matcher = match compat {
                Compat::Native => Matcher::new(pattern),
                Compat::Claude => Matcher::claude(pattern),
            }
            .map_err(|e| invalid(format!("{at}.matcher: {}", e.report())))?;
            // Claude Code's nested form: `hooks = [{type, command, timeout}]` under a matcher.
            let commands: Vec<(String, &serde_json::Map<String, Value>)> = match entry.get("hooks")
            {
                Some(Value::Array(inner)) => inner
                    .iter()
                    .enumerate()
                    .map(|(j, h)| match h {
                        Value::Object(h) => Ok((format!("{at}.hooks[{j}]"), h)),
                        _ => Err(invalid(format!("{at}.hooks[{j}]: expected a table"))),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(invalid(format!("{at}.hooks: expected an array"))),
                None => vec![(at.clone(), entry)],
            };
            for (at, table) in commands {
                n += 1;
                let hook = command_of(&at, table, compat, invalid)?;
                let name = match table.get("name").or_else(|| entry.get("name")) {
                    Some(Value::String(name)) if commands_len_is_one(entry) => {
                        format!("{prefix}{name}")
                    }
                    Some(Value::String(name)) => format!("{prefix}{name}-{n}"),
                    Some(other) => {
                        return Err(invalid(format!(
                            "{at}.name: expected a string, got {other}"
                        )));
                    }
                    None => format!("{prefix}{key}-{n:03}"),
                };
                let priority = match table.get("priority").or_else(|| entry.get("priority")) {
                    None => DEFAULT_HOOK_PRIORITY,
                    Some(v) => v
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .ok_or_else(|| {
                            invalid(format!("{at}.priority: expected an integer, got {v}"))
                        })?,
                };
                let registration = HookRegistration::new(&name, [event], hook)
                    .map_err(|e| invalid(format!("{at}.name: {}", e.report())))?
                    .with_matcher(matcher.clone())
                    .priority(priority)
                    .claude_names(compat == Compat::Claude);
                into.push(registration);
            }
        }
    }
    Ok(())
}

fn commands_len_is_one(entry: &serde_json::Map<String, Value>) -> bool {
    match entry.get("hooks") {
        Some(Value::Array(inner)) => inner.len() == 1,
        _ => true,
    }
}

/// One command hook's table: `command` (required), `timeout` in seconds, `type` (only
/// `command`).
fn command_of(
    at: &str,
    table: &serde_json::Map<String, Value>,
    compat: Compat,
    invalid: &dyn Fn(String) -> HookConfigError,
) -> Result<CommandHook, HookConfigError> {
    match table.get("type") {
        None => {}
        Some(Value::String(t)) if t == "command" => {}
        Some(other) => {
            return Err(invalid(format!(
                "{at}.type: only \"command\" hooks are supported, got {other}"
            )));
        }
    }
    let Some(Value::String(command)) = table.get("command") else {
        return Err(invalid(format!("{at}.command: expected a string")));
    };
    if command.trim().is_empty() {
        return Err(invalid(format!("{at}.command: empty")));
    }
    let timeout = match table.get("timeout") {
        None => DEFAULT_TIMEOUT,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| {
                invalid(format!(
                    "{at}.timeout: expected a positive number of seconds, got {v}"
                ))
            })?,
    };
    Ok(CommandHook::new(command.clone())
        .timeout(timeout)
        .compat(compat))
}
