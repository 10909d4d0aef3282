/**
 * A conversation's scratchpads: the structured pad (its versions, settings, recitation and
 * reorganization), the notes of executions and of the conversation, the trace of every read and
 * write, and the record of what each context render told the assistant.
 *
 * Tables: scratchpad, scratchpad_version, scratchpad_event, assistant_execution,
 * scratchpad_note, scratchpad_trace, context_render.
 *
 * Lock order: a pad write locks the conversation row, then compares versions (optimistic) and
 * appends a version; a note write takes the persistent-notes advisory lock (persistent notes
 * only) → the execution row (FOR UPDATE) → its note and trace rows. History, reorganization
 * lists and render records take no lock.
 */
export * from './notes-repo.ts';
export * from './render-log.ts';
export * from './scratchpad-history.ts';
export * from './scratchpad-reorganization.ts';
export * from './scratchpad-repo.ts';
