//! Store paths: presets, templates, environment expansion, namespace collapse, name
//! de-duplication and escaping (spec §11.2, §11.3).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, Value};
use minijinja::{Environment, Error as TemplateError, ErrorKind, State, UndefinedBehavior};

use flemma_ids::{JobId, ToolName, ToolUseId, encode_tool_name};

use crate::error::StoreError;

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

/// Escapes an id for a file name: every byte outside `[A-Za-z0-9._-]` becomes `--`, so an id
/// can never leave the store directory.
///
/// ```
/// assert_eq!(flemma_store::escape_id("bash:8"), "bash--8");
/// assert_eq!(flemma_store::escape_id("../../etc/passwd"), "..--..--etc--passwd");
/// ```
pub fn escape_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str("--");
        }
    }
    // `..` alone would still climb; it cannot be a whole segment once prefixed.
    if out == "." || out == ".." {
        out.insert_str(0, "--");
    }
    out
}

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

    /// Renders the path (spec §11.3 steps 2-6). `vars` looks up inline variables before the
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

/// Removes `.` segments and folds `..` lexically (a relative path stays relative: leading
/// `..` are kept; `/..` is `/`).
pub(crate) fn normalize(path: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Steps 4-6 of the pipeline on one string: normalize (`.` dropped, `..` folded), collapse the
/// namespaces, de-duplicate the name; one allocation for the result.
fn finish(path: &str, name: &str) -> PathBuf {
    let absolute = path.starts_with('/');
    let mut segments: Vec<&str> = Vec::with_capacity(16);
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => match segments.last() {
                Some(&last) if last != ".." => {
                    segments.pop();
                }
                _ if absolute => {}
                _ => segments.push(".."),
            },
            other => segments.push(other),
        }
    }
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    let mut previous_is_namespace = false;
    let mut first = true;
    let count = segments.len();
    for (i, segment) in segments.into_iter().enumerate() {
        if segment == "flemma" && previous_is_namespace {
            continue;
        }
        previous_is_namespace = segment == "flemma" || segment == ".flemma";
        if !first {
            out.push('/');
        }
        first = false;
        // The file name leaves room for the writer's derived names; a directory whose name
        // is longer than NAME_MAX could not exist, so shortening it changes no real path.
        let limit = if i + 1 == count {
            MAX_FILE_NAME
        } else {
            NAME_MAX
        };
        if name.is_empty() || !segment.contains(name) {
            out.push_str(&shorten(segment, limit));
            continue;
        }
        let mut current = segment.to_owned();
        while let Some(next) = dedupe_once(&current, name) {
            current = next;
        }
        out.push_str(&shorten(&current, limit));
    }
    PathBuf::from(out)
}

/// The most bytes a file name may have on the file systems the store runs on (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// The longest store file name a rendered path keeps: `NAME_MAX` (255 bytes) less room for the names
/// the writer derives from it, the temporary `.<name>.<pid>.<n>.tmp` (37 bytes more at most)
/// and a `version` backup's `<stem>.<n>.<ext>` (11 more). Longer names are shortened by
/// [`shorten`].
pub const MAX_FILE_NAME: usize = 200;

/// The longest extension [`shorten`] keeps as such (`.txt`); a longer tail is part of the stem.
const MAX_EXTENSION: usize = 16;

/// A path segment of at most `limit` bytes: the segment itself when it fits, else a readable
/// prefix of it, `-`, the 16 hex digits of the FNV-1a hash of the whole segment, and its
/// extension (`tool_bash_toolu_aaaa…-1f2e3d4c5b6a7988.txt`).
///
/// Deterministic, so that every lookup of an id renders the same name; two segments that
/// differ anywhere (past the prefix too) get different hashes.
pub fn shorten(segment: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    if segment.len() <= limit {
        return std::borrow::Cow::Borrowed(segment);
    }
    let extension = segment
        .rfind('.')
        .filter(|&dot| dot > 0 && segment.len() - dot <= MAX_EXTENSION)
        .map_or("", |dot| &segment[dot..]);
    let hash = format!("-{:016x}", fnv1a(segment.as_bytes()));
    let mut end = limit.saturating_sub(hash.len() + extension.len());
    while !segment.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{hash}{extension}", &segment[..end]))
}

/// FNV-1a, 64 bits: stable across processes, platforms and Rust versions, unlike
/// `DefaultHasher`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Drops a `flemma` segment that directly follows a kept `flemma` or `.flemma` segment, to a
/// fixed point (`/x/.flemma/flemma/y` → `/x/.flemma/y`).
pub fn collapse_namespaces(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut previous_is_namespace = false;
    for component in path.components() {
        let text = component.as_os_str();
        if text == "flemma" && previous_is_namespace {
            continue;
        }
        previous_is_namespace = text == "flemma" || text == ".flemma";
        out.push(text);
    }
    out
}

/// Inside each segment, reduces `<name><sep><name>` (one non-alphanumeric separator, bounded
/// by non-alphanumerics or the segment's edges) to `<name>`, to a fixed point.
pub fn dedupe_name(path: &Path, name: &str) -> PathBuf {
    path.components()
        .map(|c| {
            let segment = c.as_os_str().to_string_lossy();
            let mut current = segment.into_owned();
            while let Some(next) = dedupe_once(&current, name) {
                current = next;
            }
            current
        })
        .collect()
}

fn dedupe_once(segment: &str, name: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let boundary =
        |i: Option<usize>| i.is_none_or(|i| i >= bytes.len() || !bytes[i].is_ascii_alphanumeric());
    let mut from = 0;
    while let Some(found) = segment[from..].find(name) {
        let start = from + found;
        let sep = start + name.len();
        let second = sep + 1;
        if boundary(start.checked_sub(1))
            && sep < bytes.len()
            && !bytes[sep].is_ascii_alphanumeric()
            && segment.is_char_boundary(second)
            && segment[second..].starts_with(name)
            && boundary(Some(second + name.len()))
        {
            return Some(format!(
                "{}{}",
                &segment[..sep],
                &segment[second + name.len()..]
            ));
        }
        from = start + 1;
        while !segment.is_char_boundary(from) {
            from += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "A" => Some("$B".into()),
            "B" => Some("bee".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn inline_expansion() {
        assert_eq!(
            expand_inline("${XDG_STATE_HOME:-$HOME/.flemma}/x", &env),
            "/home/u/.flemma/x"
        );
        assert_eq!(expand_inline("$A/$UNSET/${B}", &env), "bee//bee");
        assert_eq!(expand_inline("${EMPTY:-dflt} $ 5$", &env), "dflt $ 5$");
        assert_eq!(expand_inline("${TMPDIR:-/tmp}", &env), "/tmp");
    }

    #[test]
    fn namespace_collapse() {
        let c = |p: &str| {
            collapse_namespaces(Path::new(p))
                .to_string_lossy()
                .into_owned()
        };
        assert_eq!(c("/x/.flemma/flemma/y"), "/x/.flemma/y");
        assert_eq!(c("/opt/flemma/flemma/flemma/x"), "/opt/flemma/x");
        assert_eq!(c("myflemma/flemma"), "myflemma/flemma");
        assert_eq!(c("flemma/flemma-lab"), "flemma/flemma-lab");
    }

    #[test]
    fn name_dedupe() {
        let d = |p: &str, n: &str| dedupe_name(Path::new(p), n).to_string_lossy().into_owned();
        assert_eq!(d("/s/tool_bash_bash--8.txt", "bash"), "/s/tool_bash--8.txt");
        assert_eq!(
            d("/s/tool_bash_bashful.txt", "bash"),
            "/s/tool_bash_bashful.txt"
        );
        assert_eq!(
            d("/s/tool_xbash_bash.txt", "bash"),
            "/s/tool_xbash_bash.txt"
        );
        assert_eq!(d("/s/a_bash_bash_bash_b", "bash"), "/s/a_bash_b");
        assert_eq!(
            d(
                "/s/tool_flemma__jobs__status_flemma__jobs__status--20.txt",
                "flemma__jobs__status"
            ),
            "/s/tool_flemma__jobs__status--20.txt"
        );
    }

    #[test]
    fn normalization() {
        let n = |p: &str| normalize(p).to_string_lossy().into_owned();
        assert_eq!(n("/a/./b/../c"), "/a/c");
        assert_eq!(n("../../x"), "../../x");
        assert_eq!(n("a/../../b"), "../b");
        assert_eq!(n("/../etc"), "/etc");
        assert_eq!(n("./a/.."), "");
    }

    #[test]
    fn escaping() {
        assert_eq!(escape_id("has space"), "has--space");
        assert_eq!(escape_id("path/to/x"), "path--to--x");
        assert_eq!(
            escape_id("flemma__jobs__status:20"),
            "flemma__jobs__status--20"
        );
        assert_eq!(escape_id(".."), "--..");
        assert_eq!(
            flatten("/home/user/notes/example.chat"),
            "home--user--notes--example.chat"
        );
    }
}
