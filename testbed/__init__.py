"""The test bed: real servers and hosts started on this machine for the tests, the benchmarks and the tools,
never for a user's run.

``spark_cluster`` starts a Spark standalone cluster (a master, a worker per host, here or in network-namespace
hosts), each JVM a ``process_group`` (a server started as a process group, waited for by its log line, stopped
by its group; the tests' Ray and MLflow servers are too). ``servers`` starts the storage servers (SeaweedFS for S3, Azurite for Azure Blob, NFS-Ganesha for NFS, a
JuiceFS gateway for the cache tier) on 127.0.0.1 in a private folder; ``storage_host`` puts them behind a
capped link in a network namespace of their own; ``rpcbind_stub`` is the stand-in for rpcbind that lets
NFS-Ganesha serve NFSv3 on a shared machine; ``storage_sites`` gives every declared storage backend a fresh
place on its real server (what tests/conformance/test_conformance_storage.py runs over).

It may import ``harness`` (the product); nothing in ``harness/`` or ``frameworks/`` imports it
(tests/unit/house/test_architecture.py): tests/, benchmarks/ and tools/ do.
"""
