/**
 * The first line of every failure of the `opspad` command (src/cli/failure.ts):
 * `opspad <command>: <what was wrong>. <what to do>.`
 */
export const FAILURE_SHAPE = /^opspad(?: [a-z]+)*: \S[^\n]*[.?!] \S[^\n]*[.?!]\n/;
