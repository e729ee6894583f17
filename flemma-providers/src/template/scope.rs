//! The scope a template renders in: the conversation's file, the variables, `include()` and
//! `@./file` references.

use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use flemma_ast::Segment;
use serde_json::{Map, Value};

use super::access::{Lookups, expand_home, normalize};
use super::limits::{MAX_FILE_BYTES, MAX_INCLUDE_DEPTH};
use super::{
    FileAccess, FilePart, FileReference, MARKER_CLOSE, MARKER_OPEN, TemplateEngine, TemplateError,
    TemplatePiece, fileref, pieces,
};
use crate::prompt::Part;

/// The environment a template renders in: the file it belongs to, the variables, and
/// `include()`. Cheap to clone; clones share the files included so far.
#[derive(Clone)]
pub struct Scope {
    shared: Arc<Shared>,
    filename: Option<Arc<Path>>,
    dirname: Arc<Path>,
    depth: usize,
}

struct Shared {
    engine: Arc<dyn TemplateEngine>,
    variables: Map<String, Value>,
    files: FileAccess,
    state: Mutex<State>,
}

/// A reference that could not be attached: its line and why.
pub(crate) struct Warning {
    pub(crate) line: u32,
    pub(crate) message: String,
}

#[derive(Default)]
struct State {
    /// The file parts handed out as markers.
    files: Vec<FilePart>,
    /// The files being included, outermost first.
    stack: Vec<PathBuf>,
    /// References that could not be attached.
    warnings: Vec<Warning>,
    /// The directories looked at.
    lookups: Lookups,
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("engine", &self.shared.engine)
            .field("filename", &self.filename)
            .field("dirname", &self.dirname)
            .field("variables", &self.shared.variables)
            .finish_non_exhaustive()
    }
}

impl Scope {
    /// A scope for the conversation at `chat_path` (`None` for an unsaved one: `__filename`
    /// is then unset and relative paths resolve against the working directory), reading any
    /// the files of the conversation's project (see [`Scope::with_file_access`]).
    pub fn new(
        engine: Arc<dyn TemplateEngine>,
        chat_path: Option<&Path>,
        variables: Map<String, Value>,
    ) -> Self {
        Self::with_file_access(engine, chat_path, variables, FileAccess::default())
    }

    /// [`Scope::new`] reading only the files `files` allows.
    pub fn with_file_access(
        engine: Arc<dyn TemplateEngine>,
        chat_path: Option<&Path>,
        variables: Map<String, Value>,
        files: FileAccess,
    ) -> Self {
        // Resolved once here rather than for every file read.
        let files = files.resolved(chat_path);
        let filename = chat_path.map(|p| Arc::from(normalize(&expand_home(p))));
        let dirname = filename
            .as_deref()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| Arc::from(Path::new(".")), Arc::from);
        Self {
            shared: Arc::new(Shared {
                engine,
                variables,
                files,
                state: Mutex::new(State::default()),
            }),
            filename,
            dirname,
            depth: 0,
        }
    }

    /// The file the template belongs to (`__filename`).
    pub fn filename(&self) -> Option<&Path> {
        self.filename.as_deref()
    }

    /// Its directory (`__dirname`); `.` for an unsaved conversation.
    pub fn dirname(&self) -> &Path {
        &self.dirname
    }

    /// The template variables (from the frontmatter).
    pub fn variables(&self) -> &Map<String, Value> {
        &self.shared.variables
    }

    /// `path` resolved: `~/` is the home directory, absolute paths stay, relative paths join
    /// [`dirname`](Self::dirname); `.` and `..` are folded.
    pub fn resolve(&self, path: &str) -> PathBuf {
        if let Some(relative) = plain_relative(path) {
            // What `normalize` gives for it: `dirname` is folded already.
            return if self.dirname.as_os_str() == "." {
                PathBuf::from(relative)
            } else {
                self.dirname.join(relative)
            };
        }
        let path = expand_home(Path::new(path));
        if path.is_absolute() {
            normalize(&path)
        } else {
            normalize(&self.dirname.join(path))
        }
    }

    /// `include(path)`: the file's text, itself rendered as a template in a scope whose
    /// `__filename` is the included file.
    ///
    /// # Errors
    ///
    /// [`TemplateError::Read`], [`TemplateError::NotText`], [`TemplateError::Cycle`],
    /// [`TemplateError::TooDeep`], or the included template's own error.
    pub fn include(&self, path: &str) -> Result<String, TemplateError> {
        let resolved = self.resolve(path);
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(TemplateError::TooDeep { path: resolved });
        }
        let identity = std::fs::canonicalize(&resolved).unwrap_or_else(|_| resolved.clone());
        {
            let mut state = self.state();
            if state.stack.contains(&identity) {
                let mut chain = state.stack.clone();
                chain.push(identity);
                return Err(TemplateError::Cycle { chain });
            }
            state.stack.push(identity);
        }
        let result = self.include_text(&resolved);
        self.state().stack.pop();
        result
    }

    fn include_text(&self, resolved: &Path) -> Result<String, TemplateError> {
        self.shared
            .files
            .check(resolved, &mut self.state().lookups)?;
        let bytes = read_file(resolved)?;
        let text = String::from_utf8(bytes).map_err(|_| TemplateError::NotText {
            path: resolved.to_owned(),
        })?;
        let child = Scope {
            shared: Arc::clone(&self.shared),
            filename: Some(Arc::from(resolved)),
            dirname: resolved
                .parent()
                .map_or_else(|| Arc::from(Path::new("/")), Arc::from),
            depth: self.depth + 1,
        };
        let segments = flemma_ast::parse_template(&text, 1);
        child.render_text(&pieces(&segments, false))
    }

    /// `include(path, {binary = true, mime = …})`: the file as a file part (an image, a PDF, a
    /// text file or an unsupported file, by `mime` or by detection). Returns the marker to
    /// put in the rendered text; the prompt builder turns it into the part.
    ///
    /// # Errors
    ///
    /// [`TemplateError::Read`] when the file cannot be read.
    pub fn include_file(&self, path: &str, mime: Option<&str>) -> Result<String, TemplateError> {
        let resolved = self.resolve(path);
        self.shared
            .files
            .check(&resolved, &mut self.state().lookups)?;
        let bytes = read_file(&resolved)?;
        let part = FilePart::from_bytes(path, &bytes, mime);
        let mut state = self.state();
        state.files.push(part);
        Ok(format!(
            "{MARKER_OPEN}{}{MARKER_CLOSE}",
            state.files.len() - 1
        ))
    }

    /// The text to emit for an `@./file` reference: the file part's marker, or, when the file
    /// cannot be read, the reference as written (the prompt builder then reports a warning).
    pub fn reference(&self, reference: &FileReference<'_>) -> String {
        match self.include_file(&reference.path, reference.mime) {
            Ok(marker) => marker,
            Err(err) => {
                // `File reference <written> not attached: <the error and its causes>`, written
                // into one string.
                let mut message = String::with_capacity(256 + 2 * reference.written.len());
                message.push_str("File reference ");
                message.push_str(reference.written);
                message.push_str(" not attached: ");
                err.write_message(&mut message);
                let mut source = std::error::Error::source(&err);
                while let Some(cause) = source {
                    let _ = write!(message, ": {cause}");
                    source = cause.source();
                }
                self.state().warnings.push(Warning {
                    line: reference.line,
                    message,
                });
                reference.written.to_owned()
            }
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves the state usable: it only grows.
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Renders pieces to text, with the engine unless every piece is plain (text, file
    /// references, and expressions that name a string variable).
    pub(crate) fn render_text(
        &self,
        pieces: &[TemplatePiece<'_>],
    ) -> Result<String, TemplateError> {
        let plain = pieces.iter().all(|piece| match piece {
            TemplatePiece::Text(_) | TemplatePiece::File(_) => true,
            TemplatePiece::Expression { code, .. } => self.string_variable(code).is_some(),
            TemplatePiece::Code { .. } => false,
        });
        if !plain {
            return self.shared.engine.render(pieces, self);
        }
        let texts: usize = pieces
            .iter()
            .map(|piece| match piece {
                TemplatePiece::Text(text) => text.len(),
                TemplatePiece::File(reference) => reference.written.len(),
                _ => 0,
            })
            .sum();
        let mut out = String::with_capacity(texts + 64);
        for piece in pieces {
            match piece {
                TemplatePiece::Text(text) => out.push_str(text),
                TemplatePiece::File(reference) => out.push_str(&self.reference(reference)),
                TemplatePiece::Expression { code, .. } => {
                    out.push_str(self.string_variable(code).unwrap_or_default());
                }
                TemplatePiece::Code { .. } => {}
            }
        }
        Ok(out)
    }

    /// The value of `code` when it is the bare name of a string variable: what every engine
    /// renders for it.
    fn string_variable(&self, code: &str) -> Option<&str> {
        let name = code.trim();
        match name {
            // Unset for an unsaved conversation: both engines render it as nothing.
            "__filename" => Some(self.filename().and_then(Path::to_str).unwrap_or_default()),
            "__dirname" => self.dirname().to_str(),
            _ => self.variables().get(name).and_then(Value::as_str),
        }
    }

    /// Renders `segments` into text and file parts. `references`: whether `@./file`
    /// references in text are attached. Returns the warnings about references not attached,
    /// with their lines.
    /// A lone text without references is borrowed, not rendered.
    pub(crate) fn render_parts<'s>(
        &self,
        segments: &'s [Segment],
        references: bool,
    ) -> Result<(Vec<Part<'s>>, Vec<Warning>), TemplateError> {
        if let [Segment::Text(text)] = segments
            && (!references || !fileref::has_reference(&text.value))
        {
            return Ok((vec![Part::text(text.value.as_str())], Vec::new()));
        }
        let first_file = self.state().files.len();
        let rendered = self.render_text(&pieces(segments, references));
        let mut state = self.state();
        let warnings = std::mem::take(&mut state.warnings);
        // The files of this render only: a marker that names an earlier one is text that
        // happens to look like a marker.
        let files = state.files.split_off(first_file);
        drop(state);
        let rendered = rendered?;
        let parts = if rendered.contains(MARKER_OPEN) {
            split_markers(&rendered, first_file, &files)
        } else {
            vec![Part::text(rendered)]
        };
        Ok((parts, warnings))
    }
}

/// `path` without its leading `./`s when what is left is a plain relative path: names
/// joined by single slashes, none of them `.`, `..` or empty, not starting with `~` or `/`.
/// Such a path joined to a folded directory is folded already.
fn plain_relative(path: &str) -> Option<&str> {
    let mut rest = path;
    while let Some(after) = rest.strip_prefix("./") {
        rest = after;
    }
    let plain = !rest.is_empty()
        && !rest.starts_with('~')
        && rest
            .split('/')
            .all(|name| !name.is_empty() && name != "." && name != "..");
    plain.then_some(rest)
}

/// Reads a file of at most [`MAX_FILE_BYTES`].
fn read_file(path: &Path) -> Result<Vec<u8>, TemplateError> {
    use std::io::Read as _;
    let read_error = |source| TemplateError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let size = file.metadata().map_err(read_error)?.len();
    if size > MAX_FILE_BYTES {
        return Err(TemplateError::TooLarge {
            path: path.to_owned(),
            size,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // A file that grows while it is read is cut at the limit, plus one byte to notice it.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TemplateError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Rendered text cut at the markers of `files` (numbered from `first`) into text and file
/// parts; other markers stay text.
fn split_markers(rendered: &str, first: usize, files: &[FilePart]) -> Vec<Part<'static>> {
    let mut parts = Vec::new();
    let mut rest = rendered;
    let mut text = String::new();
    while let Some(open) = rest.find(MARKER_OPEN) {
        let after = &rest[open + MARKER_OPEN.len()..];
        let file = after.find(MARKER_CLOSE).and_then(|close| {
            let index: usize = after[..close].parse().ok()?;
            Some((files.get(index.checked_sub(first)?)?, close))
        });
        if let Some((file, close)) = file {
            text.push_str(&rest[..open]);
            if !text.is_empty() {
                parts.push(Part::text(std::mem::take(&mut text)));
            }
            parts.push(Part::File(file.clone()));
            rest = &after[close + MARKER_CLOSE.len_utf8()..];
        } else {
            text.push_str(&rest[..open + MARKER_OPEN.len()]);
            rest = after;
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `resolve` gave before its shortcut for plain relative paths.
    fn resolved_in_full(scope: &Scope, path: &str) -> PathBuf {
        let path = expand_home(Path::new(path));
        if path.is_absolute() {
            normalize(&path)
        } else {
            normalize(&scope.dirname.join(path))
        }
    }

    fn scopes() -> Vec<Scope> {
        let engine: Arc<dyn TemplateEngine> = Arc::new(super::super::jinja::MiniJinjaEngine::new());
        let at = |chat: Option<&str>| {
            Scope::with_file_access(
                Arc::clone(&engine),
                chat.map(Path::new),
                Map::new(),
                FileAccess::Any,
            )
        };
        vec![
            at(None),
            at(Some("/work/project/talk.chat")),
            at(Some("talk.chat")),
            at(Some("../up/talk.chat")),
            at(Some("/talk.chat")),
            at(Some("./a/./b/../talk.chat")),
        ]
    }

    #[test]
    fn resolving_a_plain_relative_path_folds_as_before() {
        let paths = [
            "./src/file_1.rs",
            "src/file_1.rs",
            "././x",
            "./",
            "./a/../b",
            "./a/./b",
            "./a//b",
            "./a/b/",
            "../x",
            "~/x",
            "~x/y",
            "/abs/./x",
            ".",
            "..",
            "./.hidden",
            "./..x/y",
        ];
        for scope in scopes() {
            for path in paths {
                assert_eq!(
                    scope.resolve(path),
                    resolved_in_full(&scope, path),
                    "{path} in {:?}",
                    scope.dirname
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn resolve_agrees_with_folding_in_full(path in "[a./~]{0,12}") {
            for scope in scopes() {
                proptest::prop_assert_eq!(scope.resolve(&path), resolved_in_full(&scope, &path));
            }
        }
    }

    #[test]
    fn markers_split_into_parts_and_unknown_markers_stay_text() {
        let files = vec![FilePart::Unsupported {
            mime_type: "application/zip".into(),
            filename: "./a.zip".into(),
        }];
        let text = format!(
            "{MARKER_OPEN}2{MARKER_CLOSE}a {MARKER_OPEN}3{MARKER_CLOSE} b {MARKER_OPEN}7{MARKER_CLOSE}"
        );
        // Numbered from 3: marker 2 is another render's, marker 7 no file's.
        let parts = split_markers(&text, 3, &files);
        assert_eq!(parts.len(), 3);
        assert_eq!(
            parts[0],
            Part::text(format!("{MARKER_OPEN}2{MARKER_CLOSE}a "))
        );
        assert_eq!(parts[1], Part::File(files[0].clone()));
        assert_eq!(
            parts[2],
            Part::text(format!(" b {MARKER_OPEN}7{MARKER_CLOSE}"))
        );
    }
}
