//! [`Lease`]: which host runs a conversation now, as an object next to it.
//!
//! The lease of `dir/name.chat` is `dir/.flemma/name.chat/lease.json` (the store directory a
//! file conversation would have). Taking it is a conditional write: a create when there is
//! none (`If-None-Match: *`), a replace of a released or expired one (`If-Match` on the
//! version read), so of hosts racing for it exactly one wins. The holder renews it before it
//! expires (`If-Match` on its own last version) and releases it when done. A host that stops
//! renewing (it died, it is cut off from the bucket) loses the lease when it expires; the next
//! host takes it over and answers the calls the dead host left running.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::bucket::Bucket;
use crate::error::ObjectError;

/// The lease object's name in a conversation's store prefix.
pub const LEASE_FILE: &str = "lease.json";

/// The store prefix of the conversation `key` (`dir/name.chat` → `dir/.flemma/name.chat`):
/// where its lease is, as a file conversation's store directory is beside it.
///
/// ```
/// let key = "team/a.chat".into();
/// assert_eq!(flemma_object::store_prefix(&key).as_ref(), "team/.flemma/a.chat");
/// ```
pub fn store_prefix(key: &ObjectPath) -> ObjectPath {
    let parts: Vec<_> = key.parts().collect();
    let Some((name, dir)) = parts.split_last() else {
        return ObjectPath::from(".flemma");
    };
    let mut prefix: Vec<object_store::path::PathPart<'_>> = dir.to_vec();
    prefix.push(".flemma".into());
    prefix.push(name.clone());
    ObjectPath::from_iter(prefix)
}

/// The key of the lease of the conversation `key`.
pub fn lease_key(key: &ObjectPath) -> ObjectPath {
    store_prefix(key).join(LEASE_FILE)
}

/// A lease as stored (`lease.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LeaseRecord {
    /// Who holds (or last held) it: a worker's name, unique among the hosts.
    pub holder: String,
    /// When it was taken, seconds since the Unix epoch.
    pub acquired_at: f64,
    /// When it expires unless renewed, seconds since the Unix epoch.
    pub expires_at: f64,
    /// Whether its holder let go of it.
    #[serde(default)]
    pub released: bool,
}

impl LeaseRecord {
    /// Whether a host may take it now: released, or expired at `now`.
    pub fn is_free(&self, now: f64) -> bool {
        self.released || self.expires_at <= now
    }
}

/// What [`Lease::acquire`] found.
#[derive(Debug)]
#[non_exhaustive]
pub enum Acquired {
    /// The lease is this host's now. `previous` is the record it replaced when that one had
    /// expired without being released: a holder that died or was cut off, whose calls in
    /// progress are to be answered.
    Held {
        /// The lease.
        lease: Lease,
        /// The expired record taken over, if any.
        previous: Option<LeaseRecord>,
    },
    /// Another host holds it (`None`: it won the race just now, its record unread).
    Busy(Option<LeaseRecord>),
}

/// A conversation's lease, held by this host.
#[derive(Debug)]
pub struct Lease {
    bucket: Bucket,
    key: ObjectPath,
    url: String,
    holder: String,
    ttl: Duration,
    state: Mutex<Held>,
    /// The renewals sent (each one conditional put).
    renewals: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Clone)]
struct Held {
    version: UpdateVersion,
    acquired_at: f64,
    /// When the lease expires, by this host's clock.
    expires_at: f64,
    lost: bool,
}

/// Seconds since the Unix epoch, now.
pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Lease {
    /// Tries to take the lease of the conversation `conversation` for `holder`, for `ttl`.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when the bucket cannot be reached,
    /// [`ObjectError::LeaseRecord`] when the lease object is not a lease.
    pub async fn acquire(
        bucket: &Bucket,
        conversation: &ObjectPath,
        holder: &str,
        ttl: Duration,
    ) -> Result<Acquired, ObjectError> {
        let key = lease_key(conversation);
        let url = bucket.url(&key);
        let found = match bucket.store().get_opts(&key, GetOptions::default()).await {
            Ok(got) => {
                let version = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                let bytes = got
                    .bytes()
                    .await
                    .map_err(|e| ObjectError::request(url.clone(), "get", e))?;
                let record: LeaseRecord =
                    serde_json::from_slice(&bytes).map_err(|source| ObjectError::LeaseRecord {
                        url: url.clone(),
                        source,
                    })?;
                Some((record, version))
            }
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(ObjectError::request(url, "get", e)),
        };
        let now = now();
        let (mode, previous) = match found {
            None => (PutMode::Create, None),
            Some((record, _)) if !record.is_free(now) => {
                return Ok(Acquired::Busy(Some(record)));
            }
            Some((record, version)) => {
                let previous = (!record.released).then_some(record);
                (PutMode::Update(version), previous)
            }
        };
        let lease = Lease {
            bucket: bucket.clone(),
            key,
            url,
            holder: holder.to_owned(),
            ttl,
            renewals: std::sync::atomic::AtomicU64::new(0),
            state: Mutex::new(Held {
                version: UpdateVersion {
                    e_tag: None,
                    version: None,
                },
                acquired_at: now,
                expires_at: now + ttl.as_secs_f64(),
                lost: false,
            }),
        };
        let record = lease.record(now, false);
        match lease.write(&record, mode).await {
            Ok(version) => {
                lease.held().version = version;
                Ok(Acquired::Held { lease, previous })
            }
            Err(ObjectError::Request {
                source:
                    object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
                ..
            }) => Ok(Acquired::Busy(None)),
            Err(e) => Err(e),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, now: f64, released: bool) -> LeaseRecord {
        LeaseRecord {
            holder: self.holder.clone(),
            acquired_at: self.held().acquired_at,
            expires_at: if released {
                now
            } else {
                now + self.ttl.as_secs_f64()
            },
            released,
        }
    }

    async fn write(
        &self,
        record: &LeaseRecord,
        mode: PutMode,
    ) -> Result<UpdateVersion, ObjectError> {
        let bytes = serde_json::to_vec(record).map_err(|source| ObjectError::LeaseRecord {
            url: self.url.clone(),
            source,
        })?;
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let put = self
            .bucket
            .store()
            .put_opts(&self.key, PutPayload::from(bytes), opts)
            .await
            .map_err(|e| ObjectError::request(self.url.clone(), "put", e))?;
        Ok(UpdateVersion {
            e_tag: put.e_tag,
            version: put.version,
        })
    }

    /// Extends the lease by its time to live from now (a conditional put on this host's last
    /// version of it).
    ///
    /// # Errors
    ///
    /// [`ObjectError::LeaseLost`] when another host took it over (it had expired) or it
    /// expired before the renewal; the host must stop writing then.
    /// [`ObjectError::Request`] when the bucket cannot be reached: the lease is still held
    /// until it expires, and renewing may be tried again.
    pub async fn renew(&self) -> Result<(), ObjectError> {
        self.check()?;
        self.renewals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = now();
        let record = self.record(now, false);
        let version = self.held().version.clone();
        match self.write(&record, PutMode::Update(version)).await {
            Ok(version) => {
                let mut held = self.held();
                held.version = version;
                held.expires_at = now + self.ttl.as_secs_f64();
                Ok(())
            }
            Err(ObjectError::Request {
                source: object_store::Error::Precondition { .. },
                ..
            }) => {
                self.held().lost = true;
                Err(self.lost("taken over by another host"))
            }
            Err(e) => Err(e),
        }
    }

    /// How many renewals this host sent for the lease (each one object request, counted by
    /// the bucket's [`requests`](crate::Bucket::requests) too): the requests that come from
    /// the time a run takes rather than from what it does.
    pub fn renewals(&self) -> u64 {
        self.renewals.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Lets go of the lease (a conditional put of a released record): another host may take
    /// it at once.
    ///
    /// # Errors
    ///
    /// As [`renew`](Self::renew); a lease already lost is not released (it is not this host's).
    pub async fn release(&self) -> Result<(), ObjectError> {
        let (version, lost) = {
            let held = self.held();
            (held.version.clone(), held.lost)
        };
        if lost {
            return Err(self.lost("taken over by another host"));
        }
        let record = self.record(now(), true);
        match self.write(&record, PutMode::Update(version)).await {
            Ok(_) => {
                let mut held = self.held();
                held.lost = true;
                held.expires_at = 0.0;
                Ok(())
            }
            Err(ObjectError::Request {
                source: object_store::Error::Precondition { .. },
                ..
            }) => Err(self.lost("taken over by another host")),
            Err(e) => Err(e),
        }
    }

    fn lost(&self, why: &'static str) -> ObjectError {
        ObjectError::LeaseLost {
            url: self.url.clone(),
            why,
        }
    }

    /// Whether this host may still write under the lease: it was not lost or released, and
    /// by this host's clock more than a sixth of its time to live is left (the margin covers
    /// a put in flight and the clocks of the hosts differing by less than that).
    ///
    /// # Errors
    ///
    /// [`ObjectError::LeaseLost`] otherwise.
    pub fn check(&self) -> Result<(), ObjectError> {
        let held = self.held().clone();
        if held.lost {
            return Err(self.lost("released or taken over"));
        }
        if held.expires_at - now() < self.margin().as_secs_f64() {
            return Err(self.lost("not renewed in time"));
        }
        Ok(())
    }

    /// The part of the time to live that must be left for a write: a sixth of it.
    fn margin(&self) -> Duration {
        self.ttl / 6
    }

    /// How often the holder renews: every third of the time to live.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// Who holds it.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease object's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The lease record of the conversation `conversation`, if it has one (`None`: none was ever
/// taken).
///
/// # Errors
///
/// As [`Lease::acquire`].
pub async fn read_lease(
    bucket: &Bucket,
    conversation: &ObjectPath,
) -> Result<Option<LeaseRecord>, ObjectError> {
    let key = lease_key(conversation);
    let url = bucket.url(&key);
    match bucket.store().get_opts(&key, GetOptions::default()).await {
        Ok(got) => {
            let bytes = got
                .bytes()
                .await
                .map_err(|e| ObjectError::request(url.clone(), "get", e))?;
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| ObjectError::LeaseRecord { url, source })
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(ObjectError::request(url, "get", e)),
    }
}
