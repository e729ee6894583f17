//! [`Bucket`]: a bucket's client, with a count of the requests made through it, and
//! [`ObjectUrl`], the `s3://bucket/key` addresses of conversations.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::TryStreamExt;
use futures_util::stream::BoxStream;
use object_store::list::PaginatedListStore;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::error::ObjectError;
use crate::listing::{self, Hints, Listed};

/// An object's address: `s3://BUCKET/KEY`.
///
/// ```
/// use flemma_object::ObjectUrl;
///
/// let url = ObjectUrl::parse("s3://chats/team/a.chat")?;
/// assert_eq!(url.bucket(), "chats");
/// assert_eq!(url.key().as_ref(), "team/a.chat");
/// assert_eq!(url.to_string(), "s3://chats/team/a.chat");
/// assert!(ObjectUrl::parse("/tmp/a.chat").is_err());
/// # Ok::<(), flemma_object::ObjectError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectUrl {
    bucket: String,
    key: ObjectPath,
}

impl ObjectUrl {
    /// Parses `s3://BUCKET/KEY` (the key may be empty: a whole bucket, as a prefix).
    ///
    /// # Errors
    ///
    /// [`ObjectError::Url`] for another scheme, an empty bucket, or a key that is not a valid
    /// object path (empty segments, `.` or `..`).
    pub fn parse(url: &str) -> Result<Self, ObjectError> {
        let bad = |reason| ObjectError::Url {
            url: url.to_owned(),
            reason,
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("the scheme is not s3://"))?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket"));
        }
        let key = key.trim_end_matches('/');
        let key = ObjectPath::parse(key).map_err(|_| bad("the key is not a valid object path"))?;
        if key.parts().any(|part| matches!(part.as_ref(), "." | "..")) {
            return Err(bad("the key has a `.` or `..` segment"));
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            key,
        })
    }

    /// Whether `text` looks like an object URL (`s3://`): what the CLI checks before it treats
    /// a FILE argument as one.
    pub fn is_object_url(text: &str) -> bool {
        text.starts_with("s3://")
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key within it.
    pub fn key(&self) -> &ObjectPath {
        &self.key
    }
}

impl fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// How many requests a [`Bucket`] has sent, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestCounts {
    /// `GET` (and conditional `GET`s answered "not modified").
    pub get: u64,
    /// `PUT` (conditional or not).
    pub put: u64,
    /// `LIST` pages.
    pub list: u64,
    /// `DELETE`, `COPY` and multipart uploads.
    pub other: u64,
}

impl RequestCounts {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.get + self.put + self.list + self.other
    }
}

#[derive(Debug, Default)]
struct Counters {
    get: AtomicU64,
    put: AtomicU64,
    list: AtomicU64,
    other: AtomicU64,
}

/// A bucket: the client of one object store and the bucket's name.
///
/// Cloning is cheap; the clones share the client and the request counts.
///
/// ```
/// use std::sync::Arc;
/// use flemma_object::Bucket;
///
/// // Any `object_store` store: here one in memory (it honours conditional writes too).
/// let bucket = Bucket::with_store("chats", Arc::new(object_store::memory::InMemory::new()));
/// assert_eq!(bucket.name(), "chats");
/// assert_eq!(bucket.requests().total(), 0);
/// ```
#[derive(Clone)]
pub struct Bucket {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    store: Counting,
    /// The same store's paginated listing, when it has one: the listing that skips the keys
    /// `object_store` cannot take as paths.
    pages: Option<Arc<dyn PaginatedListStore>>,
}

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucket")
            .field("name", &self.inner.name)
            .field("requests", &self.requests())
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// The S3 bucket `name`, its client configured from the process's `AWS_*` environment
    /// variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    /// `AWS_REGION`, `AWS_ENDPOINT_URL` for S3-compatible servers, `AWS_ALLOW_HTTP=true` for
    /// a plain-HTTP one). Credentials are read, never written anywhere.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Connect`] when the environment does not make a client (a malformed
    /// endpoint, for example).
    pub fn from_env(name: &str) -> Result<Self, ObjectError> {
        // The workspace's TLS stack has no default provider of its own: install ring's (a
        // no-op when the process has one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(name)
            .build()
            .map_err(|source| ObjectError::Connect {
                bucket: name.to_owned(),
                source,
            })?;
        Ok(Self::with_paginated_store(name, Arc::new(store)))
    }

    /// The bucket `name` of `store` (any [`ObjectStore`] that implements conditional puts:
    /// S3, `object_store`'s in-memory store, a store of the host's own).
    ///
    /// Its listings go through [`ObjectStore::list`]: on a server where anyone may write keys
    /// that are not valid [`object_store` paths](ObjectPath) (a `.`, `..` or empty segment),
    /// prefer [`with_paginated_store`](Self::with_paginated_store).
    pub fn with_store(name: &str, store: Arc<dyn ObjectStore>) -> Self {
        Self::new(name, store, None)
    }

    /// The bucket `name` of `store`, listed page by page through its [`PaginatedListStore`]
    /// (S3's `ListObjectsV2`; [`from_env`](Self::from_env) makes such a bucket).
    ///
    /// `object_store` refuses a whole page of a listing when one of its keys is not a valid
    /// path (a `.`, `..` or empty segment, a control character); such a key, which anyone who
    /// may write to the bucket can make, would hide every object listed after it. A bucket
    /// made here skips it instead (a [`Worker`](crate::Worker) warns of it once) and lists the
    /// others, at the cost of a few more `LIST`s: about twenty for each such key the first
    /// time, two at each later look of the same [`Worker`](crate::Worker), which remembers where
    /// it was.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_object::Bucket;
    ///
    /// # let _ = rustls::crypto::ring::default_provider().install_default();
    /// let s3 = object_store::aws::AmazonS3Builder::new()
    ///     .with_bucket_name("chats")
    ///     .with_region("us-east-1")
    ///     .build()?;
    /// let bucket = Bucket::with_paginated_store("chats", Arc::new(s3));
    /// assert_eq!(bucket.name(), "chats");
    /// # Ok::<(), object_store::Error>(())
    /// ```
    pub fn with_paginated_store<S>(name: &str, store: Arc<S>) -> Self
    where
        S: ObjectStore + PaginatedListStore,
    {
        let pages: Arc<dyn PaginatedListStore> = Arc::clone(&store) as _;
        Self::new(name, store, Some(pages))
    }

    fn new(
        name: &str,
        store: Arc<dyn ObjectStore>,
        pages: Option<Arc<dyn PaginatedListStore>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                store: Counting {
                    inner: store,
                    counts: Arc::default(),
                },
                pages,
            }),
        }
    }

    /// The bucket's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The URL of `key` in this bucket.
    pub fn url(&self, key: &ObjectPath) -> String {
        format!("s3://{}/{key}", self.inner.name)
    }

    /// The requests sent through this bucket (and its clones) so far.
    pub fn requests(&self) -> RequestCounts {
        let c = &self.inner.store.counts;
        RequestCounts {
            get: c.get.load(Ordering::Relaxed),
            put: c.put.load(Ordering::Relaxed),
            list: c.list.load(Ordering::Relaxed),
            other: c.other.load(Ordering::Relaxed),
        }
    }

    /// The same bucket and client, with counts of its own (starting at zero): to count the
    /// requests of one part of the work.
    #[must_use]
    pub fn with_own_counts(&self) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: self.inner.name.clone(),
                store: Counting {
                    inner: Arc::clone(&self.inner.store.inner),
                    counts: Arc::default(),
                },
                pages: self.inner.pages.clone(),
            }),
        }
    }

    /// The client, counting its requests.
    pub fn store(&self) -> &dyn ObjectStore {
        &self.inner.store
    }

    /// Every object under `prefix` (the whole bucket when it is empty), page by page when the
    /// bucket has a paginated listing ([`with_paginated_store`](Self::with_paginated_store)):
    /// then a key that is not a valid path is skipped and returned in [`Listed::skipped`]
    /// (`hints`: those of the last listing of `prefix`, which make it cheaper).
    pub(crate) async fn list_all(
        &self,
        prefix: &ObjectPath,
        hints: &Hints,
    ) -> Result<Listed, ObjectError> {
        let failed = |e| ObjectError::request(self.url(prefix), "list", e);
        let Some(pages) = &self.inner.pages else {
            let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
            let objects = self
                .store()
                .list(prefix)
                .try_collect()
                .await
                .map_err(failed)?;
            return Ok(Listed {
                objects,
                skipped: Vec::new(),
            });
        };
        // The paginated listing adds no delimiter to the prefix; `list` does.
        let raw = (!prefix.as_ref().is_empty()).then(|| format!("{prefix}/"));
        listing::list(pages.as_ref(), raw.as_deref(), hints, || {
            bump(&self.inner.store.counts.list);
        })
        .await
        .map_err(failed)
    }
}

/// An [`ObjectStore`] that counts the requests it forwards.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Counters>,
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[async_trait::async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        bump(&self.counts.put);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        bump(&self.counts.other);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        bump(&self.counts.get);
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        bump(&self.counts.other);
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        bump(&self.counts.list);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        bump(&self.counts.list);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        bump(&self.counts.other);
        self.inner.copy_opts(from, to, options).await
    }
}
