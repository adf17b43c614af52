"""The s3:// store: the same key layout as the folder store, objects in a bucket (MinIO or AWS).

`s3://BUCKET/PREFIX` names the place; how to reach it comes from the environment or a config
file (see s3config). Without static keys there, the credentials come from the standard provider
chain, through the minio client's own providers (_credentials): MinIO's environment names, then
AWS IAM: a web identity token (EKS's IRSA and other OIDC federation), the container credentials
endpoint (ECS, EKS Pod Identity) or the instance's metadata service.

Every object is written by one PUT, which S3 applies atomically, so a reader sees a whole record
or none (a report larger than the client's part size goes as a multipart upload, applied as
atomically when it completes).  An exclusive write is a conditional PUT (`If-None-Match: *`,
honoured by MinIO and AWS S3): the server refuses it with 412 when the object exists, so two
runners finishing the same cell at once store one record, with no check-then-put race.

A server that cannot be reached raises StoreUnavailable, which the cell keeps in its local spool
(store/spool.py); other errors (bad keys, no permission) are one-line StoreErrors.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO, TypeVar

import urllib3
from minio import Minio
from minio.credentials import ChainedProvider, EnvMinioProvider, IamAwsProvider, Provider, StaticProvider
from minio.error import MinioException, S3Error, ServerError
from urllib3.exceptions import HTTPError as Urllib3Error

from ccsweep.store.base import ResultStore, StoreError, StoreUnavailable
from ccsweep.store.s3config import S3Settings, load_settings

T = TypeVar("T")

#: A dead endpoint should be noticed within seconds, and a hanging one within a bounded time:
#: one call takes at most CALL_ATTEMPTS x (connect + read) plus a short backoff (about 30 s);
#: the spool, not the client, retries longer, within its own deadline (store/spool.py).
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
CALL_ATTEMPTS = 2
#: Concurrent conditional writes of one key: MinIO answers 409 to all but one while it decides.
CONFLICT_RETRIES = 5

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_CREDENTIAL_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}


class S3Store(ResultStore):
    """Results in `bucket` under `prefix`, through the minio client."""

    def __init__(self, bucket: str, prefix: str, settings: S3Settings):
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.settings = settings
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client = _client(settings)
        self._bucket_checked = False

    @classmethod
    def from_url(cls, url: str, settings: S3Settings | None = None) -> S3Store:
        """`s3://BUCKET[/PREFIX]`; settings from the environment and config file unless given."""
        rest = url.removeprefix("s3://")
        bucket, _, prefix = rest.partition("/")
        if not _BUCKET.fullmatch(bucket) or "?" in rest or "#" in rest:
            raise StoreError(f"--store {url}: expected s3://BUCKET/PREFIX (bucket: 3-63 of a-z 0-9 . -)")
        return cls(bucket, prefix, settings or load_settings())

    def _object(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def read_bytes(self, key: str) -> bytes | None:
        def get() -> bytes | None:
            try:
                response = self._client.get_object(self.bucket, self._object(key))
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    return None
                raise
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

        return self._call(f"read {key}", get)

    def write_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                    exclusive: bool = False) -> bool:
        if not exclusive:
            self.write_stream(key, io.BytesIO(data), content_type=content_type)
            return True
        self._ensure_bucket()
        name = self._object(key)
        for attempt in range(CONFLICT_RETRIES):
            try:
                # put_object has no way to send If-None-Match (it turns unknown headers into
                # x-amz-meta-*); _put_object is the single PUT it uses itself for small objects.
                # It is private API: its signature is that of minio==7.2.20, pinned in pyproject.toml.
                # Before raising the pin, run tests/services/test_s3_store.py (a second exclusive
                # write must be refused, and eight racing writers must store exactly one record).
                self._call(f"write {key}", lambda: self._client._put_object(
                    self.bucket, name, data, headers={"Content-Type": content_type, "If-None-Match": "*"}))
                return True
            except _Refused as refused:
                if refused.code == "PreconditionFailed":
                    return False
                time.sleep(0.05 * 2**attempt)  # ConditionalRequestConflict: another writer is deciding
        raise StoreUnavailable(f"{self.url}: cannot write {key}: concurrent writers kept conflicting")

    def write_stream(self, key: str, source: BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        """One PUT, or above the client's part size a multipart upload, which S3 also applies only
        when it completes: a reader sees the whole object or the one before."""
        self._ensure_bucket()
        length = source.seek(0, io.SEEK_END)
        source.seek(0)
        self._call(f"write {key}", lambda: self._client.put_object(
            self.bucket, self._object(key), source, length, content_type=content_type))

    def exists(self, key: str) -> bool:
        def stat() -> bool:
            try:
                self._client.stat_object(self.bucket, self._object(key))
                return True
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    return False
                raise

        return self._call(f"look up {key}", stat)

    def delete(self, key: str) -> None:
        self._call(f"delete {key}", lambda: self._client.remove_object(self.bucket, self._object(key)))

    def list_keys(self, prefix: str) -> list[str]:
        def listing() -> list[str]:
            try:
                objects = self._client.list_objects(self.bucket, prefix=self._object(prefix), recursive=True)
                start = len(self._object(""))
                return sorted(o.object_name[start:] for o in objects if o.object_name and not o.is_dir)
            except S3Error as exc:
                if exc.code == "NoSuchBucket":
                    return []
                raise

        return self._call(f"list {prefix}", listing)

    def _ensure_bucket(self) -> None:
        """Create the bucket on the first write if it is missing (reads never create it)."""
        if self._bucket_checked:
            return

        def ensure() -> None:
            if not self._client.bucket_exists(self.bucket):
                try:
                    self._client.make_bucket(self.bucket, location=self.settings.region)
                except S3Error as exc:
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise

        self._call(f"create bucket {self.bucket}", ensure)
        self._bucket_checked = True

    def _call(self, what: str, operation: Callable[[], T]) -> T:
        """Run one client operation, turning its errors into one-line store errors."""
        with self._errors(what):
            return operation()

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        where = f"{self.url} at {self.settings.endpoint}"
        try:
            yield
        except S3Error as exc:
            if exc.code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise _Refused(exc.code) from None
            hint = (" (check CCSWEEP_S3_ACCESS_KEY / CCSWEEP_S3_SECRET_KEY or the S3 config file)"
                    if exc.code in _CREDENTIAL_CODES else "")
            raise StoreError(f"{where}: cannot {what}: {exc.code}: {exc.message}{hint}") from None
        except ServerError as exc:
            if exc.status_code == 412:
                raise _Refused("PreconditionFailed") from None
            raise StoreUnavailable(f"{where}: cannot {what}: server answered HTTP {exc.status_code}") from None
        except (Urllib3Error, OSError) as exc:
            raise StoreUnavailable(f"{where}: cannot {what}: {_reason(exc)}") from None
        except MinioException as exc:
            raise StoreError(f"{where}: cannot {what}: {' '.join(str(exc).split())}") from None
        except ValueError as exc:  # minio's credential providers: none of the chain had credentials
            raise StoreError(f"{where}: cannot {what}: no S3 credentials: no static keys (CCSWEEP_S3_ACCESS_KEY "
                             f"/ CCSWEEP_S3_SECRET_KEY or the S3 config file) and the provider chain found none "
                             f"({' '.join(str(exc).split())[:200]})") from None


class _Refused(Exception):
    """The server refused a conditional write (the object exists, or another writer holds it)."""

    def __init__(self, code: str):
        self.code = code


def _reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, in one line (urllib3 nests them)."""
    reason = getattr(exc, "reason", None)
    while isinstance(reason, BaseException) and (inner := getattr(reason, "reason", None)) is not None:
        reason = inner
    text = str(reason or exc)
    if "Connection refused" in text:
        return "connection refused"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "TLS certificate not trusted (set CCSWEEP_S3_CA_BUNDLE to its CA file)"
    return " ".join(text.split())[:200]


def _client(settings: S3Settings) -> Minio:
    """A minio client with short connect timeouts and few retries: the spool handles outages."""
    http = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
        maxsize=10,
        cert_reqs="CERT_REQUIRED" if settings.verify else "CERT_NONE",
        ca_certs=str(settings.ca_bundle) if settings.ca_bundle else None,  # None: the system's CAs
        retries=urllib3.Retry(total=CALL_ATTEMPTS - 1, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
    )
    client = Minio(settings.endpoint, credentials=_credentials(settings, http), secure=settings.secure,
                   region=settings.region, http_client=http)
    if settings.path_style is True:
        client.disable_virtual_style_endpoint()
    elif settings.path_style is False:
        client.enable_virtual_style_endpoint()
    return client


def _credentials(settings: S3Settings, http: urllib3.PoolManager) -> Provider:
    """Static keys when the settings have them; otherwise the standard chain, asked at each request
    (its credentials expire and are renewed): MINIO_ACCESS_KEY / MINIO_SECRET_KEY, then IAM
    (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, the container credentials endpoint, the
    instance's metadata service), over the same short-timeout HTTP client as the store's calls."""
    if settings.access_key or settings.secret_key:
        return StaticProvider(settings.access_key or "", settings.secret_key or "", settings.session_token)
    return ChainedProvider([EnvMinioProvider(), IamAwsProvider(http_client=http)])
