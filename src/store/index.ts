export * from './conversation-repo.ts';
export * from './db.ts';
export * from './event-repo.ts';
export { type FailureRow, failuresPage } from './item-sql.ts';
export * from './migrate.ts';
export * from './notes-repo.ts';
export * from './operation-repo.ts';
export * from './organization-repo.ts';
export * from './scratchpad-repo.ts';
