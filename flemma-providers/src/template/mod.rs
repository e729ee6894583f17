//! Templates in prompts: `{{ … }}` / `{% … %}` segments and `@./file` references
//! (spec §1.11, §1.12).
//!
//! When a prompt is built, the text of `@System:` and `@You:` messages (and the results of
//! tools that declare `emits_template`) goes through a [`TemplateEngine`]. The parser has
//! already split the text into text, expression and code segments; the builder turns them
//! into [`TemplatePiece`]s (trim dashes applied, `@./file` references split out) and the
//! engine renders the pieces in a [`Scope`]: `__filename`, `__dirname`, the frontmatter's
//! variables and `include()`.
//!
//! Two engines ship: [`MiniJinjaEngine`] (the default; expressions are Jinja) and, with the
//! `lua` feature, `LuaEngine` (expressions are Lua, as the reference implementation writes
//! them). An engine only renders text: a file part (an image, a PDF) travels through the
//! rendered text as a marker that [`Scope::include_file`] hands out and the builder turns
//! back into a [`Part::File`](crate::Part::File).

mod file;
mod fileref;
mod jinja;
#[cfg(feature = "lua")]
mod lua;

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use flemma_ast::Segment;
use serde_json::{Map, Value};

pub use file::{FilePart, detect_mime};
pub use fileref::FileReference;
pub use jinja::MiniJinjaEngine;
#[cfg(feature = "lua")]
pub use lua::LuaEngine;

use crate::prompt::Part;
use fileref::Chunk;

/// How deep `include()` may nest.
const MAX_INCLUDE_DEPTH: usize = 32;

/// The largest file `include()` or an `@./file` reference reads (providers take far less).
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Opens the marker of a file part in rendered text.
const MARKER_OPEN: &str = "\u{E000}flemma-file:";
/// Closes the marker of a file part.
const MARKER_CLOSE: char = '\u{E001}';

/// Evaluates templates when a prompt is built.
///
/// An engine renders a sequence of [`TemplatePiece`]s into text: text pieces as they are,
/// each expression's value, code run for its effect (code may wrap the pieces after it, as
/// `{% if x %}` … `{% endif %}` does), and each file reference as the text
/// [`Scope::reference`] returns. Scope gives the variables and `include()`.
///
/// ```
/// use std::sync::Arc;
/// use flemma_providers::{Scope, TemplateEngine, TemplateError, TemplatePiece};
///
/// /// An engine that knows one expression: `upper`.
/// #[derive(Debug)]
/// struct Shouting;
///
/// impl TemplateEngine for Shouting {
///     fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError> {
///         let mut out = String::new();
///         for piece in pieces {
///             match piece {
///                 TemplatePiece::Text(text) => out.push_str(text),
///                 TemplatePiece::Expression { code, line } if code.trim() == "upper" => out.push_str("HEY"),
///                 TemplatePiece::File(reference) => out.push_str(&scope.reference(reference)),
///                 TemplatePiece::Expression { line, .. } | TemplatePiece::Code { line, .. } => {
///                     return Err(TemplateError::render(Some(*line), "only `upper` is known"));
///                 }
///             }
///         }
///         Ok(out)
///     }
/// }
///
/// let doc = flemma_ast::parse("@You:\n{{ upper }}!\n");
/// let prompt = flemma_providers::PromptBuilder::new().engine(Arc::new(Shouting)).build(&doc);
/// assert_eq!(prompt.messages[0].parts, vec![flemma_providers::Part::Text { text: "HEY!".into() }]);
/// ```
pub trait TemplateEngine: fmt::Debug + Send + Sync {
    /// Renders `pieces` in `scope`.
    ///
    /// # Errors
    ///
    /// A [`TemplateError`] when the template does not compile or fails to evaluate; errors
    /// from [`Scope::include`] are passed on.
    fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError>;
}

/// A piece of a template, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePiece<'a> {
    /// Text, emitted as it is (trim dashes are already applied).
    Text(&'a str),
    /// `{{ code }}`: the value of `code` is emitted.
    Expression {
        /// The code between the delimiters, without trim dashes.
        code: &'a str,
        /// The line of the opening delimiter.
        line: u32,
    },
    /// `{% code %}`: `code` runs; it may wrap the pieces after it.
    Code {
        /// The code between the delimiters, without trim dashes.
        code: &'a str,
        /// The line of the opening delimiter.
        line: u32,
    },
    /// An `@./file` reference; emit [`Scope::reference`] of it.
    File(FileReference<'a>),
}

/// How an engine writes each kind of piece into its program (see [`Program::generate`]).
pub(crate) trait Syntax {
    /// Text number `index` (0-based) of the program's texts.
    fn text(out: &mut String, index: usize);
    /// File reference number `index` (0-based).
    fn file(out: &mut String, index: usize);
    /// `lines` line breaks that emit nothing.
    fn pad(out: &mut String, lines: usize);
    /// An expression whose value is emitted.
    fn expression(out: &mut String, code: &str);
    /// A statement.
    fn code(out: &mut String, code: &str);
}

/// An engine's program for some pieces: the source, whose first line is `first_line` of the
/// transcript (padding keeps every piece of code on its own line, so the engine's line
/// numbers map back), with the texts and file references it looks up by index. Texts are
/// looked up rather than written into the source, so nothing in them is read as code.
pub(crate) struct Program {
    pub(crate) source: String,
    pub(crate) texts: Vec<String>,
    pub(crate) references: Vec<OwnedReference>,
    pub(crate) first_line: u32,
}

impl Program {
    pub(crate) fn generate<S: Syntax>(pieces: &[TemplatePiece<'_>], prelude: &str) -> Self {
        let first_line = pieces
            .iter()
            .find_map(|piece| match piece {
                TemplatePiece::Expression { line, .. } | TemplatePiece::Code { line, .. } => {
                    Some(*line)
                }
                _ => None,
            })
            .unwrap_or(1);
        let mut program = Program {
            source: prelude.to_owned(),
            texts: Vec::new(),
            references: Vec::new(),
            first_line,
        };
        let out = &mut program.source;
        let mut line = first_line;
        for piece in pieces {
            match piece {
                TemplatePiece::Text(text) => {
                    S::text(out, program.texts.len());
                    program.texts.push((*text).to_owned());
                }
                TemplatePiece::File(reference) => {
                    S::file(out, program.references.len());
                    program.references.push(OwnedReference::new(reference));
                }
                TemplatePiece::Expression { code, line: at }
                | TemplatePiece::Code { code, line: at } => {
                    if *at > line {
                        S::pad(out, (*at - line) as usize);
                        line = *at;
                    }
                    if matches!(piece, TemplatePiece::Expression { .. }) {
                        S::expression(out, code);
                    } else {
                        S::code(out, code);
                    }
                    line += memchr::memchr_iter(b'\n', code.as_bytes()).count() as u32;
                }
            }
        }
        program
    }

    /// A line of the program as a line of the transcript.
    pub(crate) fn transcript_line(&self, line: u32) -> u32 {
        self.first_line + line.saturating_sub(1)
    }
}

/// A file reference the engines keep past the pieces' lifetime (their functions are
/// `'static`).
#[derive(Debug, Clone)]
pub(crate) struct OwnedReference {
    path: String,
    mime: Option<String>,
    written: String,
    line: u32,
}

impl OwnedReference {
    pub(crate) fn new(reference: &FileReference<'_>) -> Self {
        Self {
            path: reference.path.to_string(),
            mime: reference.mime.map(str::to_owned),
            written: reference.written.to_owned(),
            line: reference.line,
        }
    }

    pub(crate) fn borrow(&self) -> FileReference<'_> {
        FileReference {
            path: self.path.as_str().into(),
            mime: self.mime.as_deref(),
            written: &self.written,
            line: self.line,
        }
    }
}

/// What went wrong in a template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template does not compile or fails to evaluate.
    #[error("{message}")]
    Render {
        /// The line (of the transcript, or of the included file) when known.
        line: Option<u32>,
        /// What the engine said.
        message: String,
        /// The engine's error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A file could not be read.
    #[error("cannot read '{}'", path.display())]
    Read {
        /// The resolved path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file included as text is not UTF-8.
    #[error("'{}' is not UTF-8 text (include it with binary=true)", path.display())]
    NotText {
        /// The resolved path.
        path: PathBuf,
    },
    /// A file includes itself, directly or not.
    #[error("circular include: {}", chain.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" -> "))]
    Cycle {
        /// The include chain, ending with the file included again.
        chain: Vec<PathBuf>,
    },
    /// The builder's [`FileAccess`] does not allow reading the file.
    #[error(
        "reading '{}' is not allowed here: it is outside the conversation's project and store \
         (templates.file_access = \"any\" or templates.allowed_roots widens it)",
        path.display()
    )]
    Denied {
        /// The resolved path.
        path: PathBuf,
    },
    /// A file is larger than [`MAX_FILE_BYTES`].
    #[error("'{}' is {size} bytes, more than the {MAX_FILE_BYTES} bytes a file may have", path.display())]
    TooLarge {
        /// The resolved path.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Includes nest deeper than 32 files.
    #[error("includes nest deeper than {MAX_INCLUDE_DEPTH} files at '{}'", path.display())]
    TooDeep {
        /// The file that would have been one too many.
        path: PathBuf,
    },
}

impl TemplateError {
    /// A [`TemplateError::Render`] without a source.
    pub fn render(line: Option<u32>, message: impl Into<String>) -> Self {
        TemplateError::Render {
            line,
            message: message.into(),
            source: None,
        }
    }

    /// The line the error points at, when known.
    pub fn line(&self) -> Option<u32> {
        match self {
            TemplateError::Render { line, .. } => *line,
            _ => None,
        }
    }
}

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

/// Which files `include()` and `@./file` references may read.
///
/// A transcript decides what it references, and so does any file the model `read`s (its
/// result is a template): a `{{ include("/proc/self/environ") }}` in a file of the project
/// would send the host's environment to the provider. [`FileAccess::Project`] (the default)
/// keeps reads inside the conversation's project, [`FileAccess::Within`] under chosen
/// directories, [`FileAccess::None`] refuses them all, [`FileAccess::Any`] is the reference
/// implementation's behaviour. Symbolic links are resolved before the check, so a link in the
/// project that points outside it is refused. A refused reference stays text, with a warning;
/// a refused `include()` is a template error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAccess {
    /// Any file the process can read (the reference implementation's behaviour).
    Any,
    /// Files inside the conversation's project ([`flemma_config::project_root`] of the
    /// conversation file's resolved directory) or under one of these directories (the store,
    /// `templates.allowed_roots`). A conversation without a file has no project: only the
    /// directories given.
    Project(Vec<PathBuf>),
    /// Files under one of these directories only.
    Within(Vec<PathBuf>),
    /// No file.
    None,
}

impl Default for FileAccess {
    /// [`FileAccess::Project`] with no other directory.
    fn default() -> Self {
        FileAccess::Project(Vec::new())
    }
}

impl FileAccess {
    /// Files under `root` only.
    pub fn within(root: impl Into<PathBuf>) -> Self {
        FileAccess::Within(vec![root.into()])
    }

    /// The access `templates.*` asks for: `"project"` is [`FileAccess::Project`] with the
    /// store directory and `templates.allowed_roots` (`~/` expanded), `"any"` is
    /// [`FileAccess::Any`], `"none"` is [`FileAccess::None`].
    ///
    /// ```
    /// use flemma_providers::FileAccess;
    ///
    /// let options = flemma_config::Config::new().options()?;
    /// let store = std::path::Path::new("/srv/store");
    /// assert_eq!(
    ///     FileAccess::from_options(&options.templates, Some(store)),
    ///     FileAccess::Project(vec![store.to_owned()])
    /// );
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn from_options(options: &flemma_config::TemplatesOptions, store: Option<&Path>) -> Self {
        match options.file_access {
            flemma_config::FileAccessMode::Any => FileAccess::Any,
            flemma_config::FileAccessMode::None => FileAccess::None,
            _ => FileAccess::Project(
                store
                    .map(Path::to_owned)
                    .into_iter()
                    .chain(
                        options
                            .allowed_roots
                            .iter()
                            .map(|root| expand_home(Path::new(root))),
                    )
                    .collect(),
            ),
        }
    }

    /// The directories of `Project` and `Within`, resolved once (symbolic links followed) for
    /// the conversation at `chat_path`.
    fn resolved(self, chat_path: Option<&Path>) -> Self {
        let resolve = |roots: Vec<PathBuf>| -> Vec<PathBuf> {
            roots
                .into_iter()
                .map(|root| std::fs::canonicalize(&root).unwrap_or_else(|_| normalize(&root)))
                .collect()
        };
        match self {
            FileAccess::Within(roots) => FileAccess::Within(resolve(roots)),
            FileAccess::Project(roots) => {
                let mut roots = resolve(roots);
                // A conversation not saved yet has its directory.
                let dir = |chat: PathBuf| {
                    flemma_config::conversation_dir(&chat).or_else(|_| {
                        let parent = chat.parent().filter(|p| !p.as_os_str().is_empty());
                        std::fs::canonicalize(parent.unwrap_or(Path::new(".")))
                    })
                };
                if let Some(dir) = chat_path.map(expand_home).and_then(|chat| dir(chat).ok()) {
                    roots.insert(0, flemma_config::project_root(&dir));
                }
                FileAccess::Within(roots)
            }
            other => other,
        }
    }

    /// Whether `path` may be read.
    fn check(&self, path: &Path) -> Result<(), TemplateError> {
        let denied = || TemplateError::Denied {
            path: path.to_owned(),
        };
        match self {
            FileAccess::Any => Ok(()),
            FileAccess::None => Err(denied()),
            // The roots were made canonical when the scope was built.
            FileAccess::Within(roots) | FileAccess::Project(roots) => {
                let inside = |p: &Path| roots.iter().any(|root| p.starts_with(root));
                match std::fs::canonicalize(path) {
                    Ok(real) if inside(&real) => Ok(()),
                    // A missing file under a root is reported as missing, not as denied.
                    Err(source) if inside(&normalize(path)) => Err(TemplateError::Read {
                        path: path.to_owned(),
                        source,
                    }),
                    _ => Err(denied()),
                }
            }
        }
    }
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
        self.shared.files.check(resolved)?;
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
        self.shared.files.check(&resolved)?;
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
                self.state().warnings.push(Warning {
                    line: reference.line,
                    message: format!(
                        "File reference {} not attached: {}",
                        reference.written,
                        crate::error::chain(&err)
                    ),
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
        let mut out = String::new();
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

/// The pieces of `segments`: trim dashes applied to the neighbouring text, file references
/// split out of text when `references` is set. Other segments are skipped.
pub(crate) fn pieces(segments: &[Segment], references: bool) -> Vec<TemplatePiece<'_>> {
    let trims = |segment: Option<&Segment>| match segment {
        Some(Segment::Expression(t) | Segment::Code(t)) => (t.trim_before, t.trim_after),
        _ => (false, false),
    };
    let mut out = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        match segment {
            Segment::Text(text) => {
                let mut value = text.value.as_str();
                if i > 0 && trims(segments.get(i - 1)).1 {
                    value = value.trim_start();
                }
                if trims(segments.get(i + 1)).0 {
                    value = value.trim_end();
                }
                if value.is_empty() {
                    continue;
                }
                if references {
                    // The line of the first byte kept, after trimming.
                    let start = text.span.map_or(1, |s| s.start_line);
                    let skipped = value.as_ptr() as usize - text.value.as_ptr() as usize;
                    let first_line = start
                        + memchr::memchr_iter(b'\n', &text.value.as_bytes()[..skipped]).count()
                            as u32;
                    let chunks = fileref::split(value, first_line);
                    out.extend(chunks.into_iter().map(|chunk| match chunk {
                        Chunk::Text(text) => TemplatePiece::Text(text),
                        Chunk::Ref(reference) => TemplatePiece::File(reference),
                    }));
                } else {
                    out.push(TemplatePiece::Text(value));
                }
            }
            Segment::Expression(t) => out.push(TemplatePiece::Expression {
                code: &t.code,
                line: t.span.start_line,
            }),
            Segment::Code(t) => out.push(TemplatePiece::Code {
                code: &t.code,
                line: t.span.start_line,
            }),
            _ => {}
        }
    }
    out
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

/// `~` and `~/…` with the home directory; other paths as they are.
fn expand_home(path: &Path) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    match path.strip_prefix("~") {
        Ok(rest) => home().map_or_else(|| path.to_owned(), |home| home.join(rest)),
        Err(_) => path.to_owned(),
    }
}

/// `.` and `..` folded without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            // A `..` folds a name, never another `..` (`../../x` stays), and stops at `/`.
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn normalize_folds_dots() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("./x")), PathBuf::from("x"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
        assert_eq!(
            normalize(Path::new("./../../d/x")),
            PathBuf::from("../../d/x")
        );
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(normalize(Path::new(".")), PathBuf::from("."));
    }

    #[test]
    fn trim_dashes_trim_the_neighbouring_text() {
        let doc = flemma_ast::parse_template("a  \n{{- x -}}\n  b {{ y }} c", 1);
        let got = pieces(&doc, false);
        assert_eq!(got[0], TemplatePiece::Text("a"));
        assert_eq!(got[2], TemplatePiece::Text("b "));
        assert_eq!(got[4], TemplatePiece::Text(" c"));
    }
}
