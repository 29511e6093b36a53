/**
 * Applies an append-only list of schema migrations to a Durable Object's SQLite storage.
 * Migration i (0-based) takes the schema from version i to i+1; each runs once, in its own
 * transaction with the version bump. Call it from the constructor inside blockConcurrencyWhile.
 */
export function applyMigrations(storage: DurableObjectStorage, migrations: readonly string[]): void {
  const sql = storage.sql;
  sql.exec("CREATE TABLE IF NOT EXISTS _schema_version (version INTEGER NOT NULL)");
  const row = sql.exec<{ version: number }>("SELECT version FROM _schema_version").toArray()[0];
  if (row === undefined) sql.exec("INSERT INTO _schema_version (version) VALUES (0)");
  const current = row?.version ?? 0;
  for (let version = current; version < migrations.length; version++) {
    const statement = migrations[version];
    if (statement === undefined) break;
    storage.transactionSync(() => {
      sql.exec(statement);
      sql.exec("UPDATE _schema_version SET version = ?", version + 1);
    });
  }
}
