//! Store paths: presets, templates, environment expansion, namespace collapse, name
//! de-duplication and escaping.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, Value};
use minijinja::{Environment, Error as TemplateError, ErrorKind, State, UndefinedBehavior};

use flemma_ids::{JobId, ToolName, ToolUseId, encode_tool_name};

use crate::error::StoreError;

mod names;

use names::finish;
pub use names::{MAX_FILE_NAME, collapse_namespaces, dedupe_name, shorten};
pub(crate) use names::{fnv1a, normalize};

/// The default path format.
pub const CHAT_PRESET: &str = "{{ __dirname }}/.flemma/{{ flemma.path.basename(__filename) }}/{{ source }}_{{ name }}_{{ id }}.txt";
/// The `$state` path format.
pub const STATE_PRESET: &str = "${XDG_STATE_HOME:-$HOME/.flemma}/flemma/store/{{ flemma.path.flatten(__filename) }}/{{ source }}_{{ name }}_{{ id }}.txt";

/// Who produced a stored result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A foreground result or a truncation overflow.
    Tool,
    /// A background job's delivery.
    Job,
}

impl Source {
    /// `tool` or `job`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Tool => "tool",
            Source::Job => "job",
        }
    }
}

/// Escapes an id for a file name, one path segment of `[A-Za-z0-9._-]` that can never leave
/// the store directory. Distinct ids always get distinct names.
///
/// An id of `[A-Za-z0-9._-]` alone keeps its name, unless it holds `--` or is `.` or `..`.
/// Any other id is escaped: each byte outside `[A-Za-z0-9._]` (`-` included), and a leading
/// `.`, becomes `--` and two lowercase hex digits. An escaped name always holds `--` and a
/// kept one never does, and an escaped name reads back to one id only (a `-` in it always
/// starts a `--XX`), so no two ids share a name.
///
/// ```
/// assert_eq!(flemma_store::escape_id("toolu_01.A-b"), "toolu_01.A-b");
/// assert_eq!(flemma_store::escape_id("bash:8"), "bash--3a8");
/// assert_eq!(flemma_store::escape_id("a b"), "a--20b");
/// assert_eq!(flemma_store::escape_id("a--b"), "a--2d--2db");
/// assert_eq!(flemma_store::escape_id("../../etc/passwd"), "--2e.--2f..--2fetc--2fpasswd");
/// ```
pub fn escape_id(id: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_');
    let kept =
        id.bytes().all(|b| plain(b) || b == b'-') && !id.contains("--") && id != "." && id != "..";
    if kept {
        return id.to_owned();
    }
    let mut out = String::with_capacity(id.len() + 8);
    for (at, b) in id.bytes().enumerate() {
        if plain(b) && !(at == 0 && b == b'.') {
            out.push(char::from(b));
        } else {
            out.push_str("--");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whose result a store file holds: a tool call's (`source = tool`) or a background job's
/// (`source = job`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultId<'a> {
    /// A foreground result or a truncation overflow, by tool use id.
    Tool(&'a ToolUseId),
    /// A background job's delivery, by job id.
    Job(&'a JobId),
}

impl ResultId<'_> {
    /// `tool` or `job`.
    pub fn source(self) -> Source {
        match self {
            ResultId::Tool(_) => Source::Tool,
            ResultId::Job(_) => Source::Job,
        }
    }

    /// The id as written in the transcript.
    pub fn as_str(&self) -> &str {
        match self {
            ResultId::Tool(id) => id.as_str(),
            ResultId::Job(id) => id.as_str(),
        }
    }
}

impl<'a> From<&'a ToolUseId> for ResultId<'a> {
    fn from(id: &'a ToolUseId) -> Self {
        ResultId::Tool(id)
    }
}

impl<'a> From<&'a JobId> for ResultId<'a> {
    fn from(id: &'a JobId) -> Self {
        ResultId::Job(id)
    }
}

/// A parsed path format: a template (presets expanded), compiled once.
#[derive(Debug, Clone)]
pub struct PathFormat {
    source: String,
    env: Arc<Environment<'static>>,
}

/// What a path is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct PathInputs<'a> {
    /// The tool use or job whose result it is (the source, and the id escaped when rendered).
    pub id: ResultId<'a>,
    /// The tool name (wire-encoded when rendered); `None` when unknown.
    pub name: Option<&'a ToolName>,
    /// The conversation file, when it has one.
    pub chat: Option<&'a Path>,
    /// The conversation id (`bufnr`).
    pub conversation: &'a str,
}

impl PathFormat {
    /// Parses `path_format` (a template or `$chat` / `$state`).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownPreset`] and [`StoreError::InvalidFormat`] for a template that does
    /// not compile.
    pub fn new(format: &str) -> Result<Self, StoreError> {
        let template = match preset_name(format) {
            Some("$chat") => CHAT_PRESET,
            Some("$state") => STATE_PRESET,
            Some(other) => {
                return Err(StoreError::UnknownPreset {
                    preset: other.to_owned(),
                });
            }
            None => format,
        };
        Self::compile(template)
    }

    /// Parses `unnamed_path_format` (presets are refused there).
    ///
    /// # Errors
    ///
    /// [`StoreError::PresetInUnnamed`] and [`StoreError::InvalidFormat`].
    pub fn unnamed(format: &str) -> Result<Self, StoreError> {
        if preset_name(format).is_some() {
            return Err(StoreError::PresetInUnnamed);
        }
        Self::compile(format)
    }

    fn compile(template: &str) -> Result<Self, StoreError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_template_owned("path", template.to_owned())
            .map_err(|e| invalid(template, &e))?;
        Ok(Self {
            source: template.to_owned(),
            env: Arc::new(env),
        })
    }

    /// The template (presets expanded).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Renders the path. `vars` looks up inline variables before the
    /// environment (`FLEMMA_TOOLS_STORE_PATH`).
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidFormat`] when the template fails to render.
    pub fn render(
        &self,
        inputs: &PathInputs<'_>,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PathBuf, StoreError> {
        let id = (inputs.id.source(), inputs.id.as_str());
        let name = inputs.name.map(ToolName::as_str);
        self.render_raw(id, name, inputs.chat, inputs.conversation, vars)
    }

    /// [`PathFormat::render`] from plain text, for the store directory (`id = _`).
    pub(crate) fn render_raw(
        &self,
        (source, id): (Source, &str),
        name: Option<&str>,
        chat: Option<&Path>,
        conversation: &str,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PathBuf, StoreError> {
        let name = name.map(encode_tool_name).unwrap_or_default();
        let (filename, dirname) = match chat {
            Some(chat) => {
                let chat = resolve_chat(chat, vars);
                let dirname = dirname(&chat).to_string_lossy().into_owned();
                (chat.to_string_lossy().into_owned(), dirname)
            }
            None => (String::new(), String::new()),
        };
        let ctx = minijinja::context! {
            source => source.as_str(),
            name => &*name,
            id => escape_id(id),
            __filename => filename,
            __dirname => dirname,
            bufnr => conversation,
            flemma => Value::from_object(Flemma),
        };
        let template = self
            .env
            .get_template("path")
            .map_err(|e| invalid(&self.source, &e))?;
        let rendered = template
            .render(ctx)
            .map_err(|e| invalid(&self.source, &e))?;
        let expanded = expand_inline(&rendered, vars);
        Ok(finish(&expand_tilde(&expanded, vars), &name))
    }
}

fn invalid(format: &str, err: &TemplateError) -> StoreError {
    let mut messages = vec![err.to_string()];
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        messages.push(cause.to_string());
        source = cause.source();
    }
    StoreError::InvalidFormat {
        format: format.to_owned(),
        messages: messages.join("; "),
    }
}

/// The chat file as the templates see it: a leading `~` expanded and normalised, so that
/// `~/notes/x.chat` and `/home/u/notes/x.chat` give the same store.
pub(crate) fn resolve_chat(chat: &Path, vars: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let text = chat.to_string_lossy();
    // Already absolute and normal: nothing to do.
    let normal = text.starts_with('/')
        && !text.contains("//")
        && !text.split('/').any(|s| s == "." || s == "..");
    if normal {
        return chat.to_owned();
    }
    normalize(&expand_tilde(&text, vars))
}

/// The directory of `path`: `.` for a bare file name (never the empty string, which a
/// template would turn into the filesystem root).
pub(crate) fn dirname(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
        Some(parent) => parent,
        None => path,
    }
}

/// `^\$ALNUM+$` → the preset name.
fn preset_name(format: &str) -> Option<&str> {
    let rest = format.strip_prefix('$')?;
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(format)
}

/// The `flemma` template namespace: `flemma.path.*` and `flemma.pid`.
#[derive(Debug)]
struct Flemma;

impl Object for Flemma {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "path" => Some(Value::from_object(PathHelpers)),
            "pid" => Some(Value::from(std::process::id())),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["path", "pid"])
    }
}

/// `flemma.path.basename / dirname / flatten / resolve`.
#[derive(Debug)]
struct PathHelpers;

impl Object for PathHelpers {
    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, TemplateError> {
        let [arg] = args else {
            return Err(TemplateError::new(
                ErrorKind::InvalidOperation,
                format!("flemma.path.{method} takes one path"),
            ));
        };
        let path = arg.as_str().unwrap_or_default();
        let out = match method {
            "basename" => Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            "dirname" => dirname(Path::new(path)).to_string_lossy().into_owned(),
            "flatten" => flatten(path),
            "resolve" => normalize(path).to_string_lossy().into_owned(),
            other => {
                return Err(TemplateError::new(
                    ErrorKind::UnknownMethod,
                    format!("flemma.path has no `{other}`"),
                ));
            }
        };
        Ok(Value::from(out))
    }
}

/// An absolute path as one segment: `/home/user/notes/x.chat` → `home--user--notes--x.chat`.
pub fn flatten(path: &str) -> String {
    path.trim_start_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("--")
}

/// Expands `${VAR:-default}`, `${VAR}` and `$VAR` (inline variables first, then `vars`' own
/// lookup of the environment), up to 8 passes so values holding references resolve. Unset
/// variables expand to nothing.
pub fn expand_inline(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let mut current = text.to_owned();
    for _ in 0..8 {
        let next = expand_once(&current, vars);
        if next == current {
            break;
        }
        current = next;
    }
    current
}

fn expand_once(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    while i < bytes.len() {
        if bytes[i] != b'$' {
            let next = text[i..].find('$').map_or(text.len(), |n| i + n);
            out.push_str(&text[i..next]);
            i = next;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'{')
            && let Some(close) = matching_brace(text, i + 2)
        {
            let inner = &text[i + 2..close];
            let (name, default) = match inner.find(":-") {
                Some(at) => (&inner[..at], Some(&inner[at + 2..])),
                None => (inner, None),
            };
            let value = vars(name).filter(|v| !v.is_empty());
            out.push_str(&value.unwrap_or_else(|| default.unwrap_or_default().to_owned()));
            i = close + 1;
            continue;
        }
        let len = bytes[i + 1..].iter().take_while(|&&b| is_name(b)).count();
        if len == 0 {
            out.push('$');
            i += 1;
            continue;
        }
        out.push_str(&vars(&text[i + 1..i + 1 + len]).unwrap_or_default());
        i += 1 + len;
    }
    out
}

/// The `}` closing a `${` whose body starts at `from`, nested `${…}` included.
fn matching_brace(text: &str, from: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, b) in text.bytes().enumerate().skip(from) {
        match b {
            b'{' => depth += 1,
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Expands a leading `~/` (or a lone `~`) with `HOME`.
pub(crate) fn expand_tilde(path: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    match (path.strip_prefix("~/"), path == "~") {
        (Some(rest), _) => {
            vars("HOME").map_or_else(|| path.to_owned(), |home| format!("{home}/{rest}"))
        }
        (None, true) => vars("HOME").unwrap_or_else(|| path.to_owned()),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests;
