"""Each storage backend's client: a function from its options (``[storage_options.<name>]``) to an fsspec
file system, named by the backend's declaration (``client`` of harness.contract.axes.Storage) and imported
only when a backend is opened, so that a missing client package costs nothing until then.

Credentials never come from the options: s3 reads botocore's chain (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY, profiles, roles), blob reads AZURE_STORAGE_CONNECTION_STRING (or
AZURE_STORAGE_ACCOUNT_NAME + AZURE_STORAGE_ACCOUNT_KEY) from the environment.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from harness.base.errors import UserError
from harness.storage import backends


def local_fs(options: Mapping[str, Any]):
    import fsspec

    return fsspec.filesystem("file", auto_mkdir=True)


def s3_fs(options: Mapping[str, Any]):
    import s3fs

    kwargs: dict[str, Any] = {}
    if options.get("endpoint_url"):
        kwargs["client_kwargs"] = {"endpoint_url": options["endpoint_url"]}
    # key/secret: botocore's chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, roles)
    # skip_instance_cache: fsspec's shared instance is not fork-safe; each process opens its own
    return s3fs.S3FileSystem(skip_instance_cache=True, **kwargs)


def blob_fs(options: Mapping[str, Any]):
    import adlfs

    if os.environ.get("AZURE_STORAGE_CONNECTION_STRING"):
        return adlfs.AzureBlobFileSystem(connection_string=os.environ["AZURE_STORAGE_CONNECTION_STRING"],
                                         skip_instance_cache=True)
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise UserError("storage blob: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME "
                        "(+ AZURE_STORAGE_ACCOUNT_KEY or an Azure identity), in the environment")
    return adlfs.AzureBlobFileSystem(account_name=account, account_key=os.environ.get("AZURE_STORAGE_ACCOUNT_KEY"),
                                     skip_instance_cache=True)


def cached_fs(options: Mapping[str, Any]):
    """A read-through whole-file cache on local disk (fsspec's ``filecache``) in front of ``remote``."""
    import fsspec

    remote = options.get("remote")
    if remote not in backends.REMOTES:
        raise UserError(f"storage cached: option remote must be one of {', '.join(backends.REMOTES)}; got {remote!r}")
    if not options.get("cache_dir"):
        raise UserError("storage cached: option cache_dir (a local folder for the cache) is required")
    target = backends.get(remote, options).open_fs(options)
    # expiry_time=False, check_files=False: a cached object is trusted until the cache folder is cleared,
    # which is what a warm run measures (the manifest's checksums still catch wrong bytes)
    return fsspec.filesystem("filecache", fs=target, cache_storage=str(options["cache_dir"]),
                             expiry_time=False, check_files=False, skip_instance_cache=True)


def nfs_fs(options: Mapping[str, Any]):
    """``nfs://host[:port]/export/path``: libnfs mounts the dataset root in user space; a plain path is
    an NFS folder mounted by the system, read like ``local``."""
    if not backends.is_nfs_url(options):
        return local_fs(options)
    from harness.storage.nfs_fs import NFSFileSystem

    return NFSFileSystem(str(options["url"]), version=int(options.get("nfs_version", 4)),
                         mount_port=int(options.get("nfs_mount_port", 0)))


def alluxio_fs(options: Mapping[str, Any]):
    import fsspec

    # alluxiofs registers the "alluxiofs" protocol; it fronts a remote under-storage with an Alluxio cluster
    return fsspec.filesystem("alluxiofs", etcd_hosts=options.get("etcd_hosts"),
                             target_protocol=options.get("target_protocol", "s3"))
