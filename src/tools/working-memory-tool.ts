/**
 * `read_working_memory`: the context fragment as a tool result, for hosts where the model reads
 * only what tools return (`opspad mcp`, and the agent-framework adapters). One home for its name,
 * its description and what it says when nothing is open.
 */

export const WORKING_MEMORY_TOOL_NAME = 'read_working_memory';

export const WORKING_MEMORY_TOOL_DESCRIPTION = [
  'Read your working memory: your open bulk operations (with their ids, progress, who paused them and the next action) and your scratchpad (goals, open items, facts).',
  'Call it first in every conversation, and whenever you are unsure what you were doing: your earlier messages may be gone, this is not.',
].join(' ');

export const EMPTY_WORKING_MEMORY =
  'Nothing open: no bulk operation in progress and an empty scratchpad. For work over more than 5 items, start with manage_assistant_operation {"action":"create", …}.';
