//! The result store of an object conversation on its bucket: results are written to the
//! conversation's local store directory as for a file, and copied to the bucket under the
//! conversation's store prefix (`dir/.flemma/name.chat/…`) before the transcript that names them
//! is put; a host that takes the conversation copies them back.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use futures_util::TryStreamExt as _;
use object_store::path::{Path as ObjectPath, PathPart};
use object_store::{ObjectStoreExt as _, PutPayload};

use crate::bucket::Bucket;
use crate::error::ObjectError;
use crate::lease::{LEASE_FILE, store_prefix};

/// The bucket's key of the result file `path` of the conversation `key` whose local path is
/// `local_chat` (see [`ObjectConversation::with_local_path`](crate::ObjectConversation::with_local_path)):
/// under the conversation's store prefix (`dir/.flemma/name.chat/`) for a file directly in its
/// local store directory (`LOCAL_DIR/.flemma/NAME/`), other than the lease and hidden files;
/// `None` for any other file (the job journal and the call claims, in directories of their
/// own, a `flemma.save_to` file), which stays on the machine that wrote it.
///
/// ```
/// use std::path::Path;
/// use flemma_object::result_key;
///
/// let key = "team/a.chat".into();
/// let local = Path::new("/srv/flemma/chats/team/a.chat");
/// let result = Path::new("/srv/flemma/chats/team/.flemma/a.chat/tool_bash_toolu_01.txt");
/// assert_eq!(
///     result_key(local, &key, result).map(|k| k.to_string()).as_deref(),
///     Some("team/.flemma/a.chat/tool_bash_toolu_01.txt")
/// );
/// assert_eq!(result_key(local, &key, Path::new("/srv/flemma/chats/team/out.txt")), None);
/// ```
pub fn result_key(local_chat: &Path, key: &ObjectPath, path: &Path) -> Option<ObjectPath> {
    BucketResults::new(local_chat, key).key_of(path)
}

/// Whether the path `parts` under the store directory is a result's: a file directly in it,
/// other than the lease and hidden files (a write's temporary file). The job journal
/// (`jobs/`) and the call claims are in directories of their own: they record this machine's
/// processes, and are neither copied to the bucket nor taken from it.
fn is_result(parts: &[PathPart<'_>]) -> bool {
    let [name] = parts else {
        return false;
    };
    let name = name.as_ref();
    name != LEASE_FILE && !name.starts_with('.')
}

/// The default store directory of the conversation whose local path is `chat`:
/// `DIR/.flemma/NAME`.
pub(crate) fn local_store_dir(chat: &Path) -> PathBuf {
    let name = chat.file_name().unwrap_or_default();
    chat.parent()
        .unwrap_or_else(|| Path::new(""))
        .join(".flemma")
        .join(name)
}

/// A conversation's store writes: files under the local store directory, each noted to be
/// copied to the bucket at the next put of the transcript.
#[derive(Debug)]
pub(crate) struct BucketResults {
    /// The local directory that stands for the bucket's store prefix:
    /// `LOCAL_DIR/.flemma/NAME`.
    local: PathBuf,
    /// `dir/.flemma/NAME` on the bucket.
    prefix: ObjectPath,
    /// Files written, not yet copied.
    pending: Mutex<BTreeSet<PathBuf>>,
}

impl BucketResults {
    /// The results of the conversation `key` whose local path is `local_chat`.
    pub(crate) fn new(local_chat: &Path, key: &ObjectPath) -> Self {
        Self {
            local: local_store_dir(local_chat),
            prefix: store_prefix(key),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    fn note(&self, path: &Path) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_owned());
    }

    /// The key of the local file `path`: under the store prefix, for a result directly in the
    /// local store directory (see [`is_result`]); `None` for any other file
    /// (a `flemma.save_to` file, a store path configured elsewhere): it stays on this machine.
    pub(crate) fn key_of(&self, path: &Path) -> Option<ObjectPath> {
        let relative = path.strip_prefix(&self.local).ok()?;
        let mut parts = Vec::new();
        for component in relative.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            parts.push(PathPart::from(name.to_str()?.to_owned()));
        }
        if !is_result(&parts) {
            return None;
        }
        let mut key: Vec<PathPart<'_>> = self.prefix.parts().collect();
        key.extend(parts);
        Some(ObjectPath::from_iter(key))
    }

    /// The local file of the object `key`: `None` for the lease and keys outside the prefix.
    fn path_of(&self, key: &ObjectPath) -> Option<PathBuf> {
        let parts: Vec<_> = key.prefix_match(&self.prefix)?.collect();
        if !is_result(&parts) {
            return None;
        }
        let mut path = self.local.clone();
        for part in parts {
            let name = part.as_ref();
            // Parts never hold `/`; `.` and `..` are encoded by `object_store`, but a listing
            // comes from a server.
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
                return None;
            }
            path.push(name);
        }
        Some(path)
    }

    /// Copies the files written since the last call to the bucket (one `PUT` each; a
    /// multipart upload, streamed from the file, for one larger than [`SINGLE_PUT`]). A file
    /// that cannot be read or put stays noted, and the error is returned: the transcript that
    /// names it is not put. A file that no longer exists here is dropped from the notes (with
    /// a warning): there is nothing left to copy.
    pub(crate) async fn upload(&self, bucket: &Bucket) -> Result<usize, ObjectError> {
        let noted: Vec<PathBuf> =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
                .into_iter()
                .collect();
        let mut copied = 0;
        for (at, path) in noted.iter().enumerate() {
            let Some(key) = self.key_of(path) else {
                tracing::debug!(path = %path.display(), "kept on this machine: not under the store prefix");
                continue;
            };
            match upload_file(bucket, path, &key).await {
                Ok(()) => copied += 1,
                Err(ObjectError::Results { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    tracing::warn!(path = %path.display(), "a stored result is gone before it was copied to the bucket");
                }
                Err(error) => {
                    let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                    pending.extend(noted[at..].iter().cloned());
                    return Err(error);
                }
            }
        }
        Ok(copied)
    }

    /// Copies the bucket's results of the conversation to the local store directory (one
    /// `LIST`, and one `GET` for each file missing here or of another size, streamed to a
    /// hidden temporary file beside it and renamed into place).
    pub(crate) async fn download(&self, bucket: &Bucket) -> Result<usize, ObjectError> {
        let store = bucket.store();
        let listed: Vec<_> = store
            .list(Some(&self.prefix))
            .try_collect()
            .await
            .map_err(|e| ObjectError::request(bucket.url(&self.prefix), "list", e))?;
        let mut copied = 0;
        for meta in listed {
            let Some(path) = self.path_of(&meta.location) else {
                continue;
            };
            let size = tokio::fs::metadata(&path).await.map(|m| m.len()).ok();
            if size == Some(meta.size) {
                continue;
            }
            download_file(bucket, &meta.location, &path).await?;
            copied += 1;
        }
        Ok(copied)
    }
}

/// The largest file copied to the bucket by one `PUT`; a larger one goes up in parts of this
/// size, read from the file as they are sent (at most two in flight), so that a result of any
/// size is copied in bounded memory.
pub(crate) const SINGLE_PUT: usize = 8 << 20;

async fn upload_file(bucket: &Bucket, path: &Path, key: &ObjectPath) -> Result<(), ObjectError> {
    use tokio::io::AsyncReadExt as _;
    let local = |source| ObjectError::Results {
        path: path.to_owned(),
        source,
    };
    let remote = |e| ObjectError::request(bucket.url(key), "put", e);
    let mut file = tokio::fs::File::open(path).await.map_err(local)?;
    let size = file.metadata().await.map_err(local)?.len();
    if size <= SINGLE_PUT as u64 {
        let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.read_to_end(&mut content).await.map_err(local)?;
        bucket
            .store()
            .put(key, PutPayload::from(content))
            .await
            .map_err(remote)?;
        return Ok(());
    }
    let upload = bucket.store().put_multipart(key).await.map_err(remote)?;
    let mut parts = object_store::WriteMultipart::new_with_chunk_size(upload, SINGLE_PUT);
    let mut chunk = vec![0_u8; 1 << 20];
    loop {
        let n = match file.read(&mut chunk).await {
            Ok(n) => n,
            Err(source) => {
                let _ = parts.abort().await;
                return Err(local(source));
            }
        };
        if n == 0 {
            break;
        }
        if let Err(e) = parts.wait_for_capacity(2).await {
            return Err(remote(e));
        }
        parts.write(&chunk[..n]);
    }
    parts.finish().await.map_err(remote)?;
    Ok(())
}

async fn download_file(
    bucket: &Bucket,
    location: &ObjectPath,
    path: &Path,
) -> Result<(), ObjectError> {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let url = bucket.url(location);
    let local = |source| ObjectError::Results {
        path: path.to_owned(),
        source,
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.download-{}", std::process::id()));
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(local)?;
    }
    let got = bucket
        .store()
        .get(location)
        .await
        .map_err(|e| ObjectError::request(url.clone(), "get", e))?;
    let mut stream = got.into_stream();
    let mut file = tokio::fs::File::create(&temp).await.map_err(local)?;
    let written = async {
        while let Some(bytes) = stream.next().await {
            let bytes = bytes.map_err(|e| ObjectError::request(url.clone(), "get", e))?;
            file.write_all(&bytes).await.map_err(local)?;
        }
        file.sync_all().await.map_err(local)?;
        drop(file);
        tokio::fs::rename(&temp, path).await.map_err(local)
    }
    .await;
    if written.is_err() {
        let _ = tokio::fs::remove_file(&temp).await;
    }
    written
}

/// The store's writes: to the file, then noted for the next upload.
#[derive(Debug)]
pub(crate) struct Writes(pub(crate) std::sync::Arc<BucketResults>);

impl flemma_store::StoreWrites for Writes {
    fn write(
        &self,
        path: &Path,
        content: &[u8],
        backup: &dyn flemma_store::BackupStrategy,
    ) -> Result<PathBuf, flemma_store::StoreError> {
        let written = flemma_store::write_atomic(path, content, backup)?;
        self.0.note(&written);
        Ok(written)
    }

    fn installed(&self, path: &Path) {
        self.0.note(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_under_the_local_store_directory_other_than_the_lease_have_keys() {
        let results = BucketResults::new(Path::new("/w/chats/team/a.chat"), &"team/a.chat".into());
        let key = |p: &str| results.key_of(Path::new(p)).map(|k| k.to_string());
        assert_eq!(
            key("/w/chats/team/.flemma/a.chat/tool_bash_t1.txt").as_deref(),
            Some("team/.flemma/a.chat/tool_bash_t1.txt")
        );
        // The job journal and the claims are this machine's; the lease is the worker's; the
        // rest is not the store's.
        assert_eq!(key("/w/chats/team/.flemma/a.chat/jobs/x.json"), None);
        assert_eq!(
            key("/w/chats/team/.flemma/a.chat/.tool_bash_t1.txt.tmp"),
            None
        );
        assert_eq!(key("/w/chats/team/.flemma/a.chat/lease.json"), None);
        assert_eq!(key("/w/chats/team/.flemma/a.chat/../b.chat"), None);
        assert_eq!(key("/w/chats/team/.flemma/a.chat"), None);
        assert_eq!(key("/w/chats/team/out.txt"), None);
        assert_eq!(key("/w/chats/team/.flemma/b.chat/tool_bash_t1.txt"), None);
        // And back: the listing's keys outside the prefix, and the lease, have no file.
        let path = |k: &str| results.path_of(&ObjectPath::from(k));
        assert_eq!(
            path("team/.flemma/a.chat/tool_bash_t1.txt"),
            Some(PathBuf::from(
                "/w/chats/team/.flemma/a.chat/tool_bash_t1.txt"
            ))
        );
        assert_eq!(path("team/.flemma/a.chat/lease.json"), None);
        assert_eq!(path("team/.flemma/a.chat/jobs/job_1.json"), None);
        assert_eq!(path("team/.flemma/a.chatx/t.txt"), None);
        assert_eq!(path("team/a.chat"), None);
    }
}
