"""The ledger's PostgreSQL persistence: the only code in domain/ that touches psycopg, psycopg_pool,
eventsourcing.postgres or any library's internals (import-linter enforces the imports).

    factory     LedgerFactory: eventsourcing's PostgresFactory with a LedgerDatastore, whose
                pool is a LedgerPool and whose sessions carry a lock timeout and are named
                after the master keys held (MemoryLedger names it in its env: PERSISTENCE_MODULE)
    sessions    the session names, and the ledger sessions connected to a schema (pg_stat_activity)
    recorder    LedgerRecorder: writes events and side-table rows in one transaction;
                `record`: a save past Application.save
    side_tables the side-table statements of a save (keys, claims, fingerprints, shredding,
                the revocation note) and how a save adds them to its transaction
    violations  which constraint a failed save violated (`lost_claim`, `stale_key`)
    ddl         the recorder's DDL (the library's events table reworked for partitions, the
                side tables) and the probe that skips it once it ran
    pipeline    one write (a `Transaction`) as one libpq pipeline of prepared statements
    pool        connection pools (the ledger's, the workers' and the API's read pool) that
                replace dropped connections and wait no longer than the caller's deadline, and
                a save's connection taken straight from the pool (`with_connection`), or the
                one pinned to its thread (`pinned`)
    tables      the side tables' DDL and the rows a save writes (NewDataKey, Claim, Fingerprint)
    key_table   the data-key table's SQL (DataKeyStore, in domain/ledger/keystore.py, caches)
    lookups     claim and fingerprint look-ups made before a write
    revocations the listener that drops keys other processes destroy (LISTEN on a channel the
                shredding transactions notify)
    reads       one-statement reads in autocommit, retried on a dropped connection
    codec       the sealing mapper's JSON (the json module's public API) and event construction
    sealed_state  `clear_json`: the sealed format's clear part, in SQL
    upgrade     a ledger of the release before partitions placed in partitions at start

Library behaviour relied on, each with the test that pins it (tests/domain/ledger/...). The
pool, factory and codec reach no private part of a library (issue 26), which
test_public_apis.py::test_the_persistence_uses_no_private_part_of_its_libraries checks on the
package's source (private attributes and modules, class swaps); their public extension points:

- psycopg_pool's public `getconn` overridden (pool): a connection the server closed is closed
  and given back with `putconn`, which discards and replaces it, instead of handed out;
  `connection()` goes through `getconn`:
  test_outage_pools.py::test_connections_the_server_closed_are_replaced_not_handed_out,
  test_outage_pools.py::test_the_read_pools_replace_connections_the_server_closed_too.
- The same override cuts the wait to the deadline; PostgresDatastore's `get_connection` and
  the library's `retry` let an error that is not a psycopg or persistence error
  (LedgerUnavailable) pass at once (pool):
  test_outage_pools.py::test_a_pool_waits_no_longer_than_the_deadline_and_not_at_all_past_it,
  test_outage_pools.py::test_past_the_deadline_the_librarys_own_retries_stop_at_once.
- PostgresDatastore's public `after_connect_func` overridden, chaining the library's, and the
  datastore's pool built as the library's `__init__` builds it; PostgresFactory's datastore
  rebuilt as a LedgerDatastore from its public attributes (factory, sessions):
  test_ledger_pool.py::test_the_ledger_datastore_and_pool_are_the_ledgers,
  test_ledger_pool.py::test_the_ledger_datastore_has_every_setting_the_library_read_from_the_env,
  test_ledger_pool.py::test_every_ledger_connection_has_the_lock_timeout_for_its_session,
  test_ledger_pool.py::test_every_ledger_connection_is_named_after_its_master_keys,
  test_ledger_faults.py::test_a_save_blocked_on_its_partitions_head_gives_up_and_its_retry_writes_once.
- PostgresApplicationRecorder.create_table skipped (only `datastore.register_type_adapters`
  runs) when the schema holds the last object of the ledger's DDL, because the library runs all
  its statements in one transaction (recorder.create_table):
  test_ledger_faults.py::test_a_ledger_starting_beside_saves_in_flight_neither_waits_nor_deadlocks.
- libpq pipeline mode through psycopg's low-level `pq` objects (`enter_pipeline_mode`,
  `send_prepare`, `send_query_prepared`, `pipeline_sync`, `get_result`), `Connection.wait` with
  a `psycopg.waiting` generator, `psycopg.adapt.Transformer.set_dumper_types`/`dump_sequence`,
  `psycopg.errors.error_from_result`, and psycopg deallocating every prepared statement after a
  ROLLBACK it sees (pipeline):
  test_write_pipeline.py::test_a_statement_used_twice_before_it_is_prepared_runs_twice,
  test_write_pipeline.py::test_a_failing_statement_rolls_back_the_whole_write_and_leaves_the_connection_idle,
  test_write_pipeline.py::test_statements_deallocated_by_psycopg_are_prepared_again,
  test_write_pipeline.py::test_a_write_on_a_dropped_connection_raises_an_operational_error,
  test_write_pipeline.py::test_parameters_are_dumped_by_the_declared_types,
  test_write_pipeline.py::test_a_parameter_that_cannot_be_dumped_fails_the_write_without_hanging.
- PostgresDatastore.get_connection bypassed by `getconn`/`putconn`, with its error mapping
  copied (pool.with_connection):
  test_ledger_checkout.py::test_the_connection_goes_back_to_the_pool_after_the_work,
  test_ledger_checkout.py::test_psycopg_errors_are_raised_as_the_library_maps_them,
  test_ledger_checkout.py::test_a_connection_broken_during_the_work_is_discarded_not_reused,
  test_ledger_checkout.py::test_a_closed_pool_is_opened_by_the_library_path,
  test_ledger_checkout.py::test_a_pool_timeout_is_raised_as_the_library_s_operational_error.
- PostgresApplicationRecorder's `sql_create_statements`, `events_table_name`, `channel_name`
  and `datastore.originator_id_type`; its events table, extended with the partition columns
  (partitions.py), written by the recorder's own INSERT (recorder):
  test_ledger_faults.py::test_a_failure_inside_the_forget_transaction_changes_nothing,
  test_ledger_faults.py::test_a_save_blocked_on_its_partitions_head_gives_up_and_its_retry_writes_once.
- Application.save bypassed: `repository.cache`, `snapshots`, `mapper.to_stored_event`,
  `collect_events` and `recorder.insert_events(**kwargs)`, whose library path passes `tracking`
  (recorder.record):
  test_saving.py::test_the_bypass_and_the_librarys_save_write_the_same_events_and_rows,
  test_saving.py::test_with_an_aggregate_cache_the_librarys_save_runs_and_keeps_the_cache.
- psycopg's `Diagnostic.constraint_name`, reached through the `__cause__` the library chains to
  its IntegrityError (violations.lost_claim):
  test_ledger_concurrency.py::test_twenty_creates_of_the_same_key_make_one_memory.
- The JSONTranscoder's public `encoder` and `decoder` attributes, read for a JSONEncoder of the
  same configuration (without the circular-reference memo) and for the decoder's `raw_decode`
  (codec):
  test_sealing_encoding.py::test_encoder_writes_the_transcoders_bytes,
  test_sealing_encoding.py::test_encoder_writes_the_transcoders_bytes_for_escapes_and_special_floats,
  test_sealing_encoding.py::test_a_sealed_created_event_is_byte_identical_to_the_library_encoding,
  test_sealing_encoding.py::test_decoder_reads_what_the_transcoder_reads,
  test_sealing_encoding.py::test_decoder_answers_odd_input_exactly_as_the_transcoder.
- Events built as Mapper.to_domain_event builds them: `object.__new__` and a `__dict__` set
  (codec.new_event):
  test_sealing_mapper.py::test_personal_fields_are_sealed_and_audit_fields_stay_clear,
  test_sealing_mapper.py::test_old_event_versions_are_upcast_after_decryption.

The pins of psycopg and psycopg-pool (3.3.x) in pyproject.toml follow from this list: a new
minor release is taken only once these tests pass with it. Why each shortcut exists, and what
it measured, is in docs/ledger.md.
"""
