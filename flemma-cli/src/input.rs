//! Reading a transcript from a file or standard input, and writing it back.
//!
//! A transcript is read as a stream and checked as it comes: a path that is not a regular file
//! (a directory, a device such as `/dev/zero`, a FIFO, a socket) is refused before anything is
//! read, the read stops at the first byte that is not UTF-8 (so `/dev/urandom` on standard
//! input costs one buffer, not all memory), and past [`MAX_INPUT_BYTES`] it stops too.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The largest transcript the CLI reads: 256 MiB, far above any conversation a model can hold
/// (a transcript is sent whole on every request) and small enough that parsing it stays
/// within a laptop's memory.
pub(crate) const MAX_INPUT_BYTES: u64 = 256 << 20;

/// How much is read at a time.
const CHUNK: usize = 64 << 10;

/// Why a transcript could not be read or written. The message names the file; the I/O error
/// is the source, printed after it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error("cannot read {name}")]
    Read {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {name}: it is {kind}, not a regular file")]
    NotAFile { name: String, kind: &'static str },
    #[error("{name}: invalid UTF-8 at byte offset {offset} (line {line})")]
    Utf8 {
        name: String,
        offset: usize,
        line: usize,
    },
    #[error("cannot read {name}: larger than {} MiB, the most a transcript may be", MAX_INPUT_BYTES >> 20)]
    TooLarge { name: String },
    #[error(
        "{name} is an object's URL: `run`, `worker`, `store path`, `approve`, `reject` and \
         `approve-all` take one{}; this command reads files",
        if cfg!(feature = "object-store") { "" } else { " (in a build with the object-store feature)" }
    )]
    ObjectUrl { name: String },
}

/// A transcript's text and where it came from.
#[derive(Debug)]
pub(crate) struct Input {
    /// The path as given, or `<stdin>`.
    pub(crate) name: String,
    path: Option<PathBuf>,
    pub(crate) text: String,
}

impl Input {
    /// Reads `file`; `-` reads standard input.
    pub(crate) fn read(file: &Path) -> Result<Self, InputError> {
        if file.as_os_str() == "-" {
            let name = "<stdin>".to_owned();
            let text = read_text(&mut io::stdin().lock(), &name, 0)?;
            return Ok(Self {
                name,
                path: None,
                text,
            });
        }
        let name = file.display().to_string();
        // Not a file that happens to be missing: say what the user can do instead.
        if name.starts_with("s3://") {
            return Err(InputError::ObjectUrl { name });
        }
        let (mut opened, len) = open_regular(file, &name)?;
        let text = read_text(&mut opened, &name, len)?;
        Ok(Self {
            name,
            path: Some(file.to_owned()),
            text,
        })
    }

    /// Checks that `file` is a transcript [`Input::read`] would read (a regular file of UTF-8
    /// text within the size bound), for commands that hand the path to a reader of their own.
    pub(crate) fn check(file: &Path) -> Result<(), InputError> {
        Self::read(file).map(drop)
    }

    /// The file's path; `None` for standard input.
    pub(crate) fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    pub(crate) fn is_stdin(&self) -> bool {
        self.path.is_none()
    }

    /// Converts LF text to the input's own line ending ([`flemma::ast::line_ending`]).
    pub(crate) fn with_line_ending(&self, lf_text: &str) -> String {
        match flemma::ast::line_ending(&self.text) {
            "\n" => lf_text.to_owned(),
            eol => lf_text.replace('\n', eol),
        }
    }

    /// Replaces the file atomically with the store's writer ([`flemma::store::write_atomic`]:
    /// a temporary file in the same directory, fsync, rename; the file's permissions are kept;
    /// no backup).
    pub(crate) fn write_back(&self, text: &str) -> Result<(), flemma::store::StoreError> {
        match &self.path {
            Some(path) => {
                flemma::store::write_atomic(path, text.as_bytes(), &flemma::store::NoBackup)
                    .map(drop)
            }
            None => Ok(()),
        }
    }
}

/// Opens `file` for reading if it is a regular file (symbolic links followed), with its
/// length.
///
/// The file is opened without blocking (a FIFO with no writer would otherwise hold the open
/// forever) and its type is taken from the open handle, so it cannot change between the
/// check and the read.
fn open_regular(file: &Path, name: &str) -> Result<(File, u64), InputError> {
    let read_error = |source| InputError::Read {
        name: name.to_owned(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed());
    }
    let opened = match options.open(file) {
        Ok(opened) => opened,
        // Linux refuses to open a socket; say what it is rather than `No such device`.
        Err(error) => {
            return Err(match std::fs::metadata(file) {
                Ok(meta) if !meta.is_file() => not_a_file(name, meta.file_type()),
                _ => read_error(error),
            });
        }
    };
    let meta = opened.metadata().map_err(read_error)?;
    if !meta.is_file() {
        return Err(not_a_file(name, meta.file_type()));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(InputError::TooLarge {
            name: name.to_owned(),
        });
    }
    Ok((opened, meta.len()))
}

fn not_a_file(name: &str, kind: std::fs::FileType) -> InputError {
    InputError::NotAFile {
        name: name.to_owned(),
        kind: describe(kind),
    }
}

/// `a directory`, `a FIFO`, ...: what a path is when it is not a regular file.
fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Reads `reader` to its end as UTF-8, checking each chunk as it arrives: the read stops at
/// the first invalid byte and past [`MAX_INPUT_BYTES`]. `expected` is the length the text will
/// likely have (a file's size; 0 when unknown), reserved at once.
///
/// Each chunk is checked once and appended to the text as it is: the text is neither copied
/// as it grows nor checked a second time when it is complete.
fn read_text(reader: &mut dyn Read, name: &str, expected: u64) -> Result<String, InputError> {
    let mut text =
        String::with_capacity(usize::try_from(expected.min(MAX_INPUT_BYTES)).unwrap_or(0));
    let mut buffer = vec![0; CHUNK];
    // The first `held` bytes of `buffer`: the start of a sequence at the end of the last read,
    // which the next read completes.
    let mut held = 0;
    loop {
        let n = match reader.read(&mut buffer[held..]) {
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(InputError::Read {
                    name: name.to_owned(),
                    source,
                });
            }
        };
        let end = n == 0;
        let filled = held + n;
        if (text.len() + filled) as u64 > MAX_INPUT_BYTES {
            return Err(InputError::TooLarge {
                name: name.to_owned(),
            });
        }
        held = if end {
            0
        } else {
            incomplete_tail(&buffer[..filled])
        };
        let complete = &buffer[..filled - held];
        match std::str::from_utf8(complete) {
            Ok(chunk) => text.push_str(chunk),
            Err(error) => {
                let valid = &complete[..error.valid_up_to()];
                return Err(InputError::Utf8 {
                    name: name.to_owned(),
                    offset: text.len() + valid.len(),
                    line: line_feeds(text.as_bytes()) + line_feeds(valid) + 1,
                });
            }
        }
        if end {
            return Ok(text);
        }
        buffer.copy_within(filled - held..filled, 0);
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 sequence they do not complete (0 to
/// 3). Bytes that cannot start a sequence count as complete: the check reports them.
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        // A continuation byte (`10xxxxxx`): the sequence starts further back.
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let length = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if length > back { back } else { 0 };
    }
    0
}

/// The number of line feeds in `bytes`.
fn line_feeds(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out `step` bytes per read, so sequences are split across reads.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn read(bytes: &[u8], step: usize) -> Result<String, InputError> {
        read_text(&mut Trickle { bytes, step }, "t", 0)
    }

    #[test]
    fn sequences_split_across_reads_are_kept_whole() {
        let text = "a€b😀c\nд\n".repeat(50);
        for step in 1..=9 {
            assert_eq!(read(text.as_bytes(), step).unwrap(), text, "step {step}");
        }
    }

    #[test]
    fn invalid_bytes_name_their_offset_and_line_whatever_the_reads() {
        let cases: [(&[u8], usize, usize); 4] = [
            (b"ok\n\xffrest", 3, 2),
            (b"a\nb\nc\xe2\x28\xa1", 5, 3),
            // Cut off at the end of the text.
            (b"one\ntwo\xe2\x82", 7, 2),
            (b"\xf0\x9f\x98", 0, 1),
        ];
        for (bytes, offset, line) in cases {
            for step in 1..=5 {
                match read(bytes, step) {
                    Err(InputError::Utf8 {
                        offset: o, line: l, ..
                    }) => assert_eq!((o, l), (offset, line), "{bytes:?} step {step}"),
                    other => panic!("{bytes:?} step {step}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn incomplete_tails() {
        assert_eq!(incomplete_tail(b"abc"), 0);
        assert_eq!(incomplete_tail("a€".as_bytes()), 0);
        assert_eq!(incomplete_tail(&"a€".as_bytes()[..3]), 2);
        assert_eq!(incomplete_tail(&"😀".as_bytes()[..3]), 3);
        assert_eq!(incomplete_tail(b"\xff"), 0);
        assert_eq!(incomplete_tail(b"\x80\x80\x80"), 0);
    }
}
