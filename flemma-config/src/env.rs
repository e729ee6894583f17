//! `tools.env`: which of the host's environment variables tool processes see.
//!
//! A model that runs `env` reads everything the host process holds, and a host started from a
//! developer's shell holds the provider keys (`ANTHROPIC_API_KEY`) and more. So the processes
//! tools start (the foreground `bash`, background jobs, anything under the sandbox) get the
//! host's environment *filtered*: names that look like credentials are removed unless the
//! configuration keeps them. The Flemma plugin passes the whole environment; `EnvPolicy` with
//! `ignore_default_excludes = true` restores that. [`EnvPolicy`] says how the environment is
//! built, step by step.
//!
//! ```
//! use flemma_config::{EnvPolicy, Inherit};
//!
//! let host = [("PATH", "/usr/bin"), ("ANTHROPIC_API_KEY", "sk-1"), ("GITHUB_TOKEN", "gh")]
//!     .map(|(k, v)| (k.to_owned(), v.to_owned()));
//! let env = EnvPolicy::default().apply(host.clone());
//! assert_eq!(env, [("PATH".to_owned(), "/usr/bin".to_owned())]);
//!
//! let env = EnvPolicy::default().keep(["GITHUB_TOKEN"]).apply(host);
//! assert_eq!(env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["GITHUB_TOKEN", "PATH"]);
//! ```

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::glob::GlobList;

/// Where a tool process's environment starts (`tools.env.inherit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Inherit {
    /// Every variable of the host process.
    #[default]
    All,
    /// Only the [`CORE_VARS`].
    Core,
    /// None.
    None,
}

/// The variables `inherit = "core"` keeps: what a shell needs to find programs, the user's
/// home and temporary directories, and the locale.
pub const CORE_VARS: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
];

/// The names removed unless `ignore_default_excludes` is set: the credentials the SDK reads
/// itself (`flemma-providers`: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `VERTEX_ACCESS_TOKEN`)
/// and the usual spellings of secrets (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `NPM_TOKEN`, `PGPASSWORD`, `STRIPE_SECRET_KEY`, `GH_PAT`,
/// `SIGNING_PASSPHRASE`, `DOCKER_AUTH`, `GOOGLE_APPLICATION_CREDENTIALS`, …), OpenTelemetry's
/// exporter headers (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS`), and any variable
/// whose value is a URL with a password (`DATABASE_URL=postgres://u:p@db/x`). Compared
/// without regard to case.
///
/// `SSH_AUTH_SOCK` and `KUBECONFIG` are not removed: tools that use them would break (a
/// conversation that needs a credential keeps it by name: `tools.env.keep`).
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "VERTEX_ACCESS_TOKEN",
    "*API_KEY",
    "*APIKEY",
    "*API_KEY_*",
    "*TOKEN",
    "*TOKEN_*",
    "*SECRET",
    "*SECRET_*",
    "*SECRETS",
    "*PASSWORD",
    "*PASSWD",
    "*ACCESS_KEY",
    "*PRIVATE_KEY",
    "*_KEY",
    "*CREDENTIALS*",
    "*_PAT",
    "*PASSPHRASE*",
    "*_AUTH",
    // OpenTelemetry's exporter headers carry the collector's credentials
    // (`Authorization=Bearer …`, `x-honeycomb-team=…`).
    "OTEL_EXPORTER_OTLP*HEADERS",
];

/// Whether a variable's value is a URL with a password in it (`postgres://u:p@host/db`):
/// left out with the [`DEFAULT_EXCLUDES`], whatever the variable's name.
fn url_with_password(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(credentials, _)| credentials.contains(':'))
}

/// `tools.env`: how the environment of tool processes is built from the host's.
///
/// The environment is built in this order:
///
/// 1. `inherit`: all of the host's variables (`"all"`, the default), the [`CORE_VARS`]
///    (`"core"`), or none (`"none"`);
/// 2. names matching [`DEFAULT_EXCLUDES`] are removed, unless `ignore_default_excludes`;
/// 3. names matching `exclude` are removed;
/// 4. when `include_only` is not empty, only names matching it are left;
/// 5. host variables whose names match `keep` are put back, whatever steps 1-4 said;
/// 6. `set` is added (it wins over the host's values).
///
/// A tool then adds its own variables (`bash`: `GIT_PAGER`, `PAGER`, `tools.bash.env`,
/// `FLEMMA_TOOLS_STORE_PATH`). Patterns are the tool-name glob dialect (`*` matches any run of
/// characters, everything else is literal), compared without regard to case.
///
/// `Default` is the safe default: the host's environment without the [`DEFAULT_EXCLUDES`].
/// Hosts that run tools themselves build one with the methods below, or read it from
/// [`ToolsOptions::env`](crate::ToolsOptions::env).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EnvPolicy {
    /// Where the environment starts.
    pub inherit: Inherit,
    /// Keep the names [`DEFAULT_EXCLUDES`] would remove (the Flemma plugin's behaviour with `inherit =
    /// "all"`).
    pub ignore_default_excludes: bool,
    /// Patterns of names removed.
    pub exclude: Vec<String>,
    /// When not empty, only names matching one of these patterns are left.
    pub include_only: Vec<String>,
    /// Patterns of host names passed on whatever the other steps say (`GITHUB_TOKEN` for a
    /// conversation that runs `gh`).
    pub keep: Vec<String>,
    /// Variables set in every tool process.
    pub set: BTreeMap<String, String>,
}

impl EnvPolicy {
    /// The policy that passes the host's environment as it is (the Flemma plugin's behaviour).
    pub fn inherit_all() -> Self {
        Self {
            ignore_default_excludes: true,
            ..Self::default()
        }
    }

    /// Sets where the environment starts.
    #[must_use]
    pub fn inherit(mut self, inherit: Inherit) -> Self {
        self.inherit = inherit;
        self
    }

    /// Whether the [`DEFAULT_EXCLUDES`] are ignored.
    #[must_use]
    pub fn ignore_default_excludes(mut self, ignore: bool) -> Self {
        self.ignore_default_excludes = ignore;
        self
    }

    /// Adds patterns of names to remove.
    #[must_use]
    pub fn exclude<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Self {
        self.exclude.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Adds patterns of the only names to leave.
    #[must_use]
    pub fn include_only<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Self {
        self.include_only
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Adds patterns of host names always passed on.
    #[must_use]
    pub fn keep<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Self {
        self.keep.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Sets a variable in every tool process.
    #[must_use]
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.insert(name.into(), value.into());
        self
    }

    /// The environment of a tool process, from the host's variables `host`, sorted by name.
    pub fn apply<I: IntoIterator<Item = (String, String)>>(
        &self,
        host: I,
    ) -> Vec<(String, String)> {
        // The built-in lists are compiled once per process; the policy's own (often empty)
        // per call.
        static DEFAULTS: LazyLock<GlobList> =
            LazyLock::new(|| patterns(DEFAULT_EXCLUDES.iter().copied()));
        static CORE: LazyLock<GlobList> = LazyLock::new(|| patterns(CORE_VARS.iter().copied()));
        let (defaults, core) = (&*DEFAULTS, &*CORE);
        let exclude = patterns(self.exclude.iter().map(String::as_str));
        let include_only = patterns(self.include_only.iter().map(String::as_str));
        let keep = patterns(self.keep.iter().map(String::as_str));
        let mut env = BTreeMap::new();
        for (name, value) in host {
            let upper = name.to_ascii_uppercase();
            let inherited = match self.inherit {
                Inherit::All => true,
                Inherit::Core => core.is_match(&upper),
                Inherit::None => false,
            };
            let admitted = inherited
                && (self.ignore_default_excludes
                    || !(defaults.is_match(&upper) || url_with_password(&value)))
                && !exclude.is_match(&upper)
                && (self.include_only.is_empty() || include_only.is_match(&upper));
            if admitted || keep.is_match(&upper) {
                env.insert(name, value);
            }
        }
        env.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.into_iter().collect()
    }

    /// [`EnvPolicy::apply`] to the host process's own environment (variables whose name or
    /// value is not UTF-8 are left out).
    ///
    /// The last result is kept, with the policy and the host's variables it came from: a
    /// call under the same policy and an unchanged environment (every call of a session,
    /// as a rule) compares them instead of matching every name against every pattern again.
    pub fn apply_to_process(&self) -> Vec<(String, String)> {
        type Applied = (EnvPolicy, Vec<(String, String)>, Vec<(String, String)>);
        static LAST: std::sync::Mutex<Option<Applied>> = std::sync::Mutex::new(None);
        let host: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let mut last = LAST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((policy, seen, applied)) = last.as_ref()
            && policy == self
            && *seen == host
        {
            return applied.clone();
        }
        let applied = self.apply(host.iter().cloned());
        *last = Some((self.clone(), host, applied.clone()));
        applied
    }

    /// Whether the host variable `name` is left out of tool processes (`set` aside).
    pub fn hides(&self, name: &str) -> bool {
        self.apply([(name.to_owned(), String::new())]).is_empty()
    }
}

/// `patterns` upper-cased, compiled once.
fn patterns<'a>(patterns: impl Iterator<Item = &'a str>) -> GlobList {
    GlobList::new(patterns.map(str::to_ascii_uppercase))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn host() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENAI_API_KEY", "sk-oai"),
            ("VERTEX_ACCESS_TOKEN", "ya29"),
            ("MY_TOKEN", "t"),
            ("FOO_SECRET", "s"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("github_token", "gh"),
            ("PGPASSWORD", "pg"),
            ("EDITOR", "vi"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
            ("TOKENIZERS_PARALLELISM", "false"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into()
    }

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// The kept result is never another policy's: alternating policies give what `apply`
    /// gives for each.
    #[test]
    fn the_process_environment_follows_the_policy_of_each_call() {
        let process = || -> Vec<(String, String)> {
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect()
        };
        let policies = [
            EnvPolicy::default(),
            EnvPolicy::default().inherit(Inherit::None).set("ONLY", "1"),
            EnvPolicy::default().exclude(["PATH"]),
        ];
        for policy in policies
            .iter()
            .chain(policies.iter().rev())
            .chain(&policies)
        {
            assert_eq!(policy.apply_to_process(), policy.apply(process()));
        }
        assert_eq!(
            policies[1].apply_to_process(),
            vec![("ONLY".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn the_default_removes_credentials_and_keeps_the_rest() {
        let env = EnvPolicy::default().apply(host());
        assert_eq!(
            names(&env),
            [
                "EDITOR",
                "HOME",
                "PATH",
                "SSH_AUTH_SOCK",
                "TOKENIZERS_PARALLELISM"
            ]
        );
    }

    /// Issue 34: the secret-looking names the first default missed, and URLs with a password.
    #[test]
    fn the_default_removes_keys_credentials_pats_passphrases_auths_and_url_passwords() {
        let host = [
            ("DEPLOY_KEY", "k"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/etc/gcp.json"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/x"),
            ("GH_PAT", "ghp_x"),
            ("GPG_PASSPHRASE_FILE", "/p"),
            ("REGISTRY_AUTH", "dXNlcjpwYXNz"),
            ("DATABASE_URL", "postgres://app:hunter2@db:5432/app"),
            ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
            ("PLAIN_URL", "https://example.com/a@b:c"),
            ("USER_AT_HOST", "ssh://git@github.com/x"),
            ("KEYBOARD", "us"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer x"),
            ("otel_exporter_otlp_traces_headers", "x-honeycomb-team=y"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = EnvPolicy::default().apply(host.clone());
        assert_eq!(
            names(&env),
            [
                "KEYBOARD",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "PLAIN_URL",
                "SSH_AUTH_SOCK",
                "USER_AT_HOST"
            ]
        );
        // The spec's behaviour keeps them all.
        assert_eq!(EnvPolicy::inherit_all().apply(host).len(), 15);
    }

    #[test]
    fn inherit_all_is_the_spec() {
        assert_eq!(EnvPolicy::inherit_all().apply(host()).len(), host().len());
    }

    #[test]
    fn keep_readmits_a_name_and_set_wins() {
        let env = EnvPolicy::default()
            .inherit(Inherit::None)
            .keep(["MY_TOKEN", "git*"])
            .set("PATH", "/bin")
            .apply(host());
        let expected = [("MY_TOKEN", "t"), ("PATH", "/bin"), ("github_token", "gh")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(env, expected);
    }

    #[test]
    fn core_exclude_and_include_only() {
        let core = EnvPolicy::default().inherit(Inherit::Core).apply(host());
        assert_eq!(names(&core), ["HOME", "PATH"]);
        let env = EnvPolicy::default()
            .exclude(["edit*"])
            .include_only(["*E*"])
            .apply(host());
        assert_eq!(names(&env), ["HOME", "TOKENIZERS_PARALLELISM"]);
        assert!(EnvPolicy::default().hides("Anthropic_Api_Key"));
        assert!(!EnvPolicy::default().hides("EDITOR"));
    }
}
