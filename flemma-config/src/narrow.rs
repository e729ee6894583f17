//! What a conversation's frontmatter may change of the sandbox, the tools' environment and the
//! files references read: it may narrow them, never widen them.
//!
//! A transcript can come from anywhere, and its frontmatter is a layer of options above the
//! options files. For the options below, a frontmatter's value that lets more
//! happen than the host's layers (defaults, `flemma.toml`, `--set`) is not taken: the options
//! keep the host's value ([`Config::options`]) and [`Config::diagnostics`] reports the write as
//! an error ([`FinalizeIssue::FrontmatterWidens`]), which stops the conversation. Narrowing is
//! always fine: `sandbox.enabled = true`, `network = false`, an `rw_paths` without an entry,
//! `file_access = "none"`.
//!
//! A host whose conversations are all its users' own restores the Flemma plugin's behaviour (the
//! frontmatter may set any of these) with `[frontmatter] may_widen = true` in `flemma.toml`
//! or [`Config::allow_frontmatter_widening`]; no frontmatter can say that itself.

use serde_json::Value;

use crate::config::Config;
use crate::diagnostic::FinalizeIssue;

/// How a value of an option compares with another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// How the sandbox starts: only the host's layers decide it.
    HostOnly,
    /// `true` lets more happen.
    TrueWidens,
    /// `false` lets more happen.
    FalseWidens,
    /// Each item lets more happen: the frontmatter may drop items, not add them.
    Grants,
    /// Each item lets less happen: the frontmatter may add items, not drop them.
    Denies,
    /// Empty lets everything through, items only themselves.
    Only,
    /// The values from the narrowest to the widest; a value not listed is the host's or
    /// wider.
    Order(&'static [&'static str]),
    /// A limit: a lower number lets less happen; unset is no limit.
    Ceiling,
}

/// The options a frontmatter may only narrow, and how their values compare.
const RULES: &[(&str, Rule)] = &[
    ("sandbox.enabled", Rule::FalseWidens),
    ("sandbox.backend", Rule::Order(&["required", "auto"])),
    ("sandbox.backends.bwrap.path", Rule::HostOnly),
    ("sandbox.backends.bwrap.extra_args", Rule::HostOnly),
    ("sandbox.policy.rw_paths", Rule::Grants),
    ("sandbox.policy.network", Rule::TrueWidens),
    ("sandbox.policy.allow_privileged", Rule::TrueWidens),
    ("sandbox.policy.protect_conversation", Rule::FalseWidens),
    ("tools.auto_approve_sandboxed", Rule::TrueWidens),
    ("tools.bash.allow", Rule::Grants),
    ("tools.bash.ask", Rule::Denies),
    ("tools.bash.deny", Rule::Denies),
    ("tools.bash.claude_settings", Rule::TrueWidens),
    ("tools.env.inherit", Rule::Order(&["none", "core", "all"])),
    ("tools.env.ignore_default_excludes", Rule::TrueWidens),
    ("tools.env.exclude", Rule::Denies),
    ("tools.env.include_only", Rule::Only),
    ("tools.env.keep", Rule::Grants),
    (
        "templates.file_access",
        Rule::Order(&["none", "project", "any"]),
    ),
    ("templates.allowed_roots", Rule::Grants),
    ("budget.run.max_tokens", Rule::Ceiling),
    ("budget.run.max_cost", Rule::Ceiling),
    ("budget.conversation.max_tokens", Rule::Ceiling),
    ("budget.conversation.max_cost", Rule::Ceiling),
    ("compaction.enabled", Rule::TrueWidens),
    ("telemetry.capture_content", Rule::TrueWidens),
];

/// Every option of the schema, in the order of its table: path, kind, default, what it does
/// and what a frontmatter may write. The book's configuration reference is generated from it.
///
/// ```
/// let option = flemma_config::known_options()
///     .find(|o| o.path == "tools.max_concurrent")
///     .unwrap();
/// assert_eq!(option.default, 2);
/// assert_eq!(option.kind.describe(), "a non-negative integer");
/// ```
pub fn known_options() -> impl Iterator<Item = crate::schema::OptionInfo> {
    crate::schema::OPTIONS
        .iter()
        .map(|def| crate::schema::OptionInfo {
            path: def.path,
            kind: def.kind,
            default: (def.default)(),
            doc: def.doc,
            frontmatter: frontmatter_rule(def.path),
        })
}

/// What a frontmatter may write to `path`, for the options reference.
pub(crate) fn frontmatter_rule(path: &str) -> crate::schema::FrontmatterRule {
    use crate::schema::FrontmatterRule;
    let Some((_, rule)) = RULES.iter().find(|(p, _)| *p == path) else {
        return FrontmatterRule::Any;
    };
    match rule {
        Rule::HostOnly => FrontmatterRule::HostOnly,
        Rule::TrueWidens => FrontmatterRule::Narrow("may set `false`, not `true`"),
        Rule::FalseWidens => FrontmatterRule::Narrow("may set `true`, not `false`"),
        Rule::Grants => FrontmatterRule::Narrow("may leave entries out, not add any"),
        Rule::Denies => FrontmatterRule::Narrow("may add entries, not leave any out"),
        Rule::Only => FrontmatterRule::Narrow(
            "may set a list when the host's is empty, or leave entries out of the host's",
        ),
        Rule::Order(order) => FrontmatterRule::NarrowOrder(order),
        Rule::Ceiling => FrontmatterRule::Narrow("may lower it or set one, not raise or remove it"),
    }
}

fn items(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `wanted` lets more happen than `host` under `rule`.
fn widens(rule: Rule, host: &Value, wanted: &Value) -> bool {
    if host == wanted {
        return false;
    }
    match rule {
        Rule::HostOnly => true,
        Rule::TrueWidens => wanted.as_bool() == Some(true),
        Rule::FalseWidens => wanted.as_bool() == Some(false),
        Rule::Grants => {
            let host = items(host);
            items(wanted).iter().any(|w| !host.contains(w))
        }
        Rule::Denies => {
            let wanted = items(wanted);
            items(host).iter().any(|h| !wanted.contains(h))
        }
        Rule::Only => {
            let (host, wanted) = (items(host), items(wanted));
            !host.is_empty() && (wanted.is_empty() || wanted.iter().any(|w| !host.contains(w)))
        }
        Rule::Ceiling => match (host.as_f64(), wanted.as_f64()) {
            // The host set no limit: any limit narrows.
            (None, _) => false,
            (Some(host), Some(wanted)) => wanted > host,
            // Removing the host's limit, or a value that is not a number.
            (Some(_), None) => true,
        },
        Rule::Order(order) => {
            let rank = |v: &Value| v.as_str().and_then(|s| order.iter().position(|o| *o == s));
            match (rank(host), rank(wanted)) {
                (Some(host), Some(wanted)) => wanted > host,
                _ => true,
            }
        }
    }
}

/// The value of `path` as `config`'s layers give it.
fn resolved(config: &Config, path: &str) -> Value {
    if matches!(
        crate::schema::resolve_path(path, false).map(|r| r.kind),
        Ok(crate::schema::OptionKind::List)
    ) {
        Value::from(config.list(path).items)
    } else {
        config.value_of(path)
    }
}

impl Config {
    /// Whether a conversation's frontmatter may widen the sandbox, the tools' environment and
    /// the files references read (see the `narrow` rules): what the host said with
    /// [`allow_frontmatter_widening`](Self::allow_frontmatter_widening), else `may_widen` of
    /// the options files' `[frontmatter]` section, else no.
    ///
    /// ```
    /// let mut config = flemma_config::Config::new();
    /// assert!(!config.frontmatter_may_widen());
    /// config.load_toml_str("[frontmatter]\nmay_widen = true\n", "flemma.toml".as_ref())?;
    /// assert!(config.frontmatter_may_widen());
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn frontmatter_may_widen(&self) -> bool {
        self.may_widen.unwrap_or_else(|| {
            self.section("frontmatter")
                .and_then(|s| s.get("may_widen"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        })
    }

    /// Lets conversations' frontmatters widen the sandbox, the tools' environment and the
    /// files references read (`true`, the Flemma plugin's behaviour), or not, whatever the options
    /// files say.
    pub fn allow_frontmatter_widening(&mut self, allow: bool) {
        self.may_widen = Some(allow);
        self.generation = crate::config::next_generation();
    }

    /// The frontmatter's widenings: for each narrow-only option whose value the frontmatter
    /// makes wider than the host's, the path and the host's value. Empty when the frontmatter
    /// may widen, or writes none of these options.
    pub(crate) fn widenings(&self) -> Vec<(&'static str, Value)> {
        if self.frontmatter_may_widen() {
            return Vec::new();
        }
        let touched: Vec<(&'static str, Rule)> = RULES
            .iter()
            .copied()
            .filter(|(path, _)| self.frontmatter_writes(path))
            .collect();
        if touched.is_empty() {
            return Vec::new();
        }
        let mut host = self.clone();
        host.clear_layer(crate::layer::Layer::Frontmatter);
        touched
            .into_iter()
            .filter_map(|(path, rule)| {
                let host_value = resolved(&host, path);
                widens(rule, &host_value, &resolved(self, path)).then_some((path, host_value))
            })
            .collect()
    }

    /// The issues of the frontmatter's widenings, each with where it was written.
    pub(crate) fn widening_issues(&self) -> Vec<(FinalizeIssue, Option<crate::Origin>)> {
        self.widenings()
            .into_iter()
            .map(|(path, host)| {
                (
                    FinalizeIssue::FrontmatterWidens {
                        path: path.to_owned(),
                        host: host.to_string(),
                    },
                    self.frontmatter_origin(path),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_rule_tells_wider_from_narrower() {
        assert!(widens(Rule::FalseWidens, &json!(true), &json!(false)));
        assert!(!widens(Rule::FalseWidens, &json!(false), &json!(true)));
        assert!(widens(Rule::TrueWidens, &json!(false), &json!(true)));
        assert!(widens(Rule::Grants, &json!(["a"]), &json!(["a", "/"])));
        assert!(!widens(Rule::Grants, &json!(["a", "b"]), &json!(["b"])));
        assert!(widens(Rule::Denies, &json!(["AWS_*"]), &json!([])));
        assert!(!widens(
            Rule::Denies,
            &json!(["AWS_*"]),
            &json!(["AWS_*", "X"])
        ));
        assert!(!widens(Rule::Only, &json!([]), &json!(["PATH"])));
        assert!(widens(Rule::Only, &json!(["PATH"]), &json!([])));
        assert!(widens(
            Rule::Only,
            &json!(["PATH"]),
            &json!(["PATH", "HOME"])
        ));
        let order = Rule::Order(&["none", "project", "any"]);
        assert!(widens(order, &json!("project"), &json!("any")));
        assert!(!widens(order, &json!("project"), &json!("none")));
        let backend = Rule::Order(&["required", "auto"]);
        assert!(!widens(backend, &json!("auto"), &json!("required")));
        assert!(widens(backend, &json!("auto"), &json!("evil")));
        assert!(widens(Rule::HostOnly, &json!("bwrap"), &json!("./bwrap")));
        assert!(!widens(Rule::Ceiling, &json!(null), &json!(5)));
        assert!(!widens(Rule::Ceiling, &json!(1.5), &json!(0.5)));
        assert!(widens(Rule::Ceiling, &json!(1.5), &json!(2)));
        assert!(widens(Rule::Ceiling, &json!(1000), &json!(null)));
        assert!(widens(Rule::Ceiling, &json!(1000), &json!("1")));
    }
}
