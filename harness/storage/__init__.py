"""Where training data lives and how it is read: the storage back-ends behind one fsspec interface
(``backends``; each one's client in ``clients``, declared in harness.contract.axes.Storage), the
user-space NFS client (``nfs_fs``), the cache tier's metrics (``cache_tier``), the checkpoint phase
(``checkpoint``) and the data the project makes itself (``datagen``, ``textdata``). The servers the tests
start are the test bed's (``testbed/``), not the product's.

Imports ``harness.base`` and ``harness.contract`` only: the workers' input pipelines read through it.
"""
