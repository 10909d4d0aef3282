export * from './conversation-repo.ts';
export * from './db.ts';
export * from './event-repo.ts';
export * from './migrate.ts';
export * from './operation-repo.ts';
export * from './organization-repo.ts';
