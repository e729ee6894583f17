//! `urn:flemma:approval:bash-rules`: the command rules of `tools.bash.allow`, `ask` and `deny`
//! (and of Claude Code's `permissions` where the host reads them) on each `bash` call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use flemma_shell::{CommandRules, Judgement, Outcome, RuleKind, Surroundings};
use serde_json::Value;

use crate::builtin::Builtin;
use crate::error::ResolverError;
use crate::resolver::{ApprovalContext, ToolCall, Verdict};

/// The tool the rules judge.
const BASH: &str = "bash";

/// The files of Claude Code's settings read with `tools.bash.claude_settings = true`, in the
/// project's `.claude` directory.
const CLAUDE_FILES: [&str; 2] = ["settings.json", "settings.local.json"];

/// `urn:flemma:approval:bash-rules`: judges a `bash` call's `command` with the command rules
/// (see [`flemma_shell::CommandRules`]): a deny rule matching any simple command of it denies
/// the call; an ask rule, or anything the rules cannot allow (`sudo`, `eval`, a command name
/// that is an expansion, a redirection outside the conversation's writable set, text that does
/// not parse) asks; a command whose simple commands all match allow rules is approved; the
/// rules pass otherwise, and the rest of the chain decides.
///
/// The rules come from `tools.bash.allow`, `tools.bash.ask` and `tools.bash.deny`, and with
/// `tools.bash.claude_settings = true` also from the `Bash(…)` entries of `permissions.allow`,
/// `ask` and `deny` in the project's `.claude/settings.json` and `settings.local.json`
/// ([`Workspace::project`](crate::resolver::Workspace::project)). With no rule at all the resolver
/// passes on every call. A settings file that cannot be read is reported as the resolver's
/// failure and the resolver then never approves (its deny rules could not be read).
#[derive(Debug, Default)]
pub struct BashRulesResolver {
    options: Mutex<Option<(u64, Arc<Compiled>)>>,
    claude: Mutex<Option<ClaudeCache>>,
}

/// The rules of one options state, or the entry that could not be read.
#[derive(Debug)]
struct Compiled {
    rules: CommandRules,
    error: Option<String>,
}

/// Claude Code's rules of one project, with the files' identity when read.
#[derive(Debug)]
struct ClaudeCache {
    project: PathBuf,
    stamps: [Option<(SystemTime, u64)>; 2],
    read: Result<Arc<CommandRules>, String>,
}

impl BashRulesResolver {
    /// The judgement of `call` under `ctx`'s rules, as the resolver decides it: `None` when the
    /// call is not a `bash` call with a `command` string or there is no rule.
    ///
    /// # Errors
    ///
    /// A [`ResolverError`] when a rule or a settings file could not be read; the rules that
    /// could be read are not judged then.
    pub fn judge(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Option<Judgement>, ResolverError> {
        if call.name.as_str() != BASH {
            return Ok(None);
        }
        let Some(command) = call.input.get("command").and_then(Value::as_str) else {
            return Ok(None);
        };
        let compiled = self.compiled(ctx);
        if let Some(error) = &compiled.error {
            return Err(ResolverError::new(error.clone()));
        }
        let claude = if ctx.options.tools.bash.claude_settings {
            ctx.workspace
                .project()
                .map(|project| self.claude(project))
                .transpose()
                .map_err(ResolverError::new)?
        } else {
            None
        };
        let rules = match claude {
            Some(claude) if !claude.is_empty() => {
                let mut all = compiled.rules.clone();
                all.extend(claude.rules().iter().cloned());
                std::borrow::Cow::Owned(all)
            }
            _ => std::borrow::Cow::Borrowed(&compiled.rules),
        };
        if rules.is_empty() {
            return Ok(None);
        }
        let workspace = ctx.workspace;
        let mut here = Surroundings::new().writable(|path: &Path| workspace.may_write(path));
        if let Some(cwd) = workspace.cwd() {
            here = here.cwd(cwd);
        }
        Ok(Some(rules.judge(command, &here)))
    }

    /// The options' rules, compiled once per options state.
    fn compiled(&self, ctx: &ApprovalContext<'_>) -> Arc<Compiled> {
        let generation = ctx.config.generation();
        let mut slot = self.options.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, compiled)) = slot.as_ref()
            && *g == generation
        {
            return Arc::clone(compiled);
        }
        let bash = &ctx.options.tools.bash;
        let mut rules = CommandRules::new();
        let mut error = None;
        for (kind, list) in [
            (RuleKind::Allow, &bash.allow),
            (RuleKind::Ask, &bash.ask),
            (RuleKind::Deny, &bash.deny),
        ] {
            for pattern in list {
                if let Err(e) = rules.add(kind, pattern, format!("tools.bash.{kind}")) {
                    error.get_or_insert_with(|| {
                        format!("tools.bash.{kind} entry {pattern:?}: {e}; no call is approved by the rules")
                    });
                }
            }
        }
        let compiled = Arc::new(Compiled { rules, error });
        *slot = Some((generation, Arc::clone(&compiled)));
        compiled
    }

    /// Claude Code's `Bash(…)` rules of `project`, read again when a file changed.
    fn claude(&self, project: &Path) -> Result<Arc<CommandRules>, String> {
        let files = CLAUDE_FILES.map(|name| project.join(".claude").join(name));
        let stamps = files.each_ref().map(|file| {
            std::fs::metadata(file)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        });
        let mut slot = self.claude.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cache) = slot.as_ref()
            && cache.project == project
            && cache.stamps == stamps
        {
            return cache.read.clone();
        }
        let mut rules = CommandRules::new();
        let mut read = Ok(());
        for file in &files {
            if let Err(e) = claude_rules(file, &mut rules) {
                read = Err(e);
                break;
            }
        }
        let read = read.map(|()| Arc::new(rules));
        *slot = Some(ClaudeCache {
            project: project.to_owned(),
            stamps,
            read: read.clone(),
        });
        read
    }
}

/// Adds the `Bash(…)` entries of one Claude Code settings file (none when it does not exist).
fn claude_rules(file: &Path, into: &mut CommandRules) -> Result<(), String> {
    // Text of the project: a regular file, not a link or a FIFO, 1 MiB at most, UTF-8.
    let text = match flemma_config::read_project_file(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
    let Some(permissions) = json.get("permissions") else {
        return Ok(());
    };
    let origin = format!(
        ".claude/{}",
        file.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    for kind in [RuleKind::Allow, RuleKind::Ask, RuleKind::Deny] {
        let Some(entries) = permissions.get(kind.as_str()) else {
            continue;
        };
        let Some(entries) = entries.as_array() else {
            return Err(format!(
                "{}: permissions.{kind} is not an array",
                file.display()
            ));
        };
        for entry in entries.iter().filter_map(Value::as_str) {
            if let Some(pattern) = claude_pattern(entry) {
                into.add(
                    kind,
                    &pattern,
                    format!("{origin} permissions.{kind} {entry:?}"),
                )
                .map_err(|e| format!("{}: {entry:?}: {e}", file.display()))?;
            }
        }
    }
    Ok(())
}

/// The command pattern of a Claude Code permission entry for Bash: `Bash(git status:*)` is
/// `git status *`, `Bash(npm run test)` is `npm run test`, `Bash` and `Bash(*)` every command;
/// `None` for another tool's entry (`Read(…)`, `WebFetch`).
///
/// ```
/// use flemma_approval::claude_pattern;
///
/// assert_eq!(claude_pattern("Bash(git status:*)").as_deref(), Some("git status *"));
/// assert_eq!(claude_pattern("Bash(npm run test)").as_deref(), Some("npm run test"));
/// assert_eq!(claude_pattern("Bash").as_deref(), Some("*"));
/// assert_eq!(claude_pattern("Read(./src/**)"), None);
/// ```
pub fn claude_pattern(entry: &str) -> Option<String> {
    let entry = entry.trim();
    if entry == BASH_TOOL {
        return Some("*".to_owned());
    }
    let inner = entry.strip_prefix("Bash(")?.strip_suffix(')')?.trim();
    let pattern = match inner.strip_suffix(":*") {
        Some(prefix) => format!("{} *", prefix.trim_end()),
        None => inner.to_owned(),
    };
    (!pattern.trim().is_empty()).then_some(pattern)
}

/// Claude Code's name of the shell tool.
const BASH_TOOL: &str = "Bash";

impl Builtin for BashRulesResolver {
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        self.verdict_and_failure(call, ctx).0
    }

    fn verdict_and_failure(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> (Verdict, Option<ResolverError>) {
        match self.judge(call, ctx) {
            Ok(None) if call.name.as_str() == BASH => (
                Verdict::pass().because("no tools.bash.allow, ask or deny rules"),
                None,
            ),
            Ok(None) => (Verdict::pass(), None),
            Ok(Some(judgement)) => (verdict(&judgement), None),
            // Rules that could not be read may have denied it: never approve then.
            Err(error) => {
                let asks = call.name.as_str() == BASH;
                let verdict = if asks {
                    Verdict::require_approval().because(error.report())
                } else {
                    Verdict::pass()
                };
                (verdict, Some(error))
            }
        }
    }
}

/// The chain's verdict for a judgement.
fn verdict(judgement: &Judgement) -> Verdict {
    let because = judgement.summary();
    match judgement.outcome {
        Outcome::Allow => Verdict::approve().because(because),
        Outcome::Ask => Verdict::require_approval().because(because),
        Outcome::Deny => Verdict::deny(Some(because.clone())).because(because),
        Outcome::Pass => Verdict::pass().because(because),
    }
}
