//! [`BucketPlacements`]: the calls placed for a person's decision, on the bucket.

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStoreExt as _, PutPayload};

use flemma_core::placements::{Placement, Placements, entry_name};
use flemma_ids::ToolUseId;

use crate::bucket::Bucket;
use crate::lease::store_prefix;

/// The largest entry read: an entry is a few hundred bytes; a larger object is no entry.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;

/// The prefix of the placements of the conversation `key` (`dir/.flemma/name.chat/placed`).
///
/// ```
/// let key = "team/a.chat".into();
/// assert_eq!(flemma_object::placements_prefix(&key).as_ref(), "team/.flemma/a.chat/placed");
/// ```
pub fn placements_prefix(key: &ObjectPath) -> ObjectPath {
    store_prefix(key).join("placed")
}

/// A conversation's ledger of placements ([`flemma_runtime::placements`]) on the bucket, shared
/// by every host that runs it: a call one worker placed `(pending)` and a person approved
/// (`flemma approve s3://…`, or by editing the object) runs on whichever worker takes the
/// conversation next. The bucket is the fleet's own storage: whoever may write it may write
/// the transcript itself.
///
/// The entry of call `ID` is `dir/.flemma/name.chat/placed/<entry name>.json`, the text a file
/// ledger's entry has.
#[derive(Debug, Clone)]
pub struct BucketPlacements {
    bucket: Bucket,
    prefix: ObjectPath,
}

impl BucketPlacements {
    /// The ledger of the conversation `key` of `bucket`.
    pub fn new(bucket: &Bucket, key: &ObjectPath) -> Self {
        Self {
            bucket: bucket.clone(),
            prefix: placements_prefix(key),
        }
    }

    fn key(&self, id: &ToolUseId) -> ObjectPath {
        self.prefix.clone().join(entry_name(id))
    }

    fn io(&self, key: &ObjectPath, op: &str, error: &object_store::Error) -> std::io::Error {
        std::io::Error::other(format!("{op} {}: {error}", self.bucket.url(key)))
    }
}

#[async_trait::async_trait]
impl Placements for BucketPlacements {
    async fn record(&self, placement: &Placement) -> std::io::Result<()> {
        let key = self.key(&placement.id);
        let bytes = serde_json::to_vec(placement).map_err(std::io::Error::other)?;
        self.bucket
            .store()
            .put(&key, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.io(&key, "put", &e))
    }

    async fn get(&self, id: &ToolUseId) -> std::io::Result<Option<Placement>> {
        let key = self.key(id);
        let got = match self
            .bucket
            .store()
            .get_opts(&key, GetOptions::default())
            .await
        {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(self.io(&key, "get", &error)),
        };
        if got.meta.size > MAX_ENTRY_BYTES {
            tracing::warn!(key = %key, size = got.meta.size, "placement entry too large, skipped");
            return Ok(None);
        }
        let bytes = got.bytes().await.map_err(|e| self.io(&key, "get", &e))?;
        Ok(serde_json::from_slice::<Placement>(&bytes)
            .ok()
            .filter(|p| p.id == *id))
    }

    async fn remove(&self, id: &ToolUseId) -> std::io::Result<()> {
        let key = self.key(id);
        match self.bucket.store().delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(self.io(&key, "delete", &error)),
        }
    }
}
