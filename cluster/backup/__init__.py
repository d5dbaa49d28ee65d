"""Backups of a running node, and restores from them (docs/deploy.md, Backup and restore).

A backup is a folder::

    backup.json      the manifest (manifest.py): the Raft index and term it was taken at,
                     the two Raft entries the store ends at, and every file's length and
                     SHA-256
    store/           a store folder (docs/storage.md): commits.log holds one checkpoint
                     naming every file and its committed length, and each file holds
                     exactly that many bytes

A node makes one on the fly (``GET /admin/backup``, stream.py): between two applies, its
tick thread hard-links the store's files into a folder of the store's own and takes the
checkpoint (``Storage.link_for_backup``, O(files), cluster/raft/backup_point.py); the bytes up to the
committed lengths never change, so streaming them afterwards, off that thread, reads a
consistent copy while the node goes on applying. The stream is a tar of the folder above
with ``backup.json`` as its last member, its SHA-256s computed as the files were read;
receive.py unpacks it and checks every file against them. restore.py turns a backup into
a node's data folder.
"""
