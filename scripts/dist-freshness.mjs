// Whether dist/ is a complete build of the current sources: its stamp (written last by
// scripts/build.mjs) is newer than every TypeScript file under src/ and under packages/client/src/
// (the build compiles @dialtone/client first, which the CLI imports). Shared by the build (to skip
// an up-to-date build), `npm start` (prestart) and bin/dialtone (to fall back to the sources).
import { readdirSync, statSync } from 'node:fs';

/** The build's time, or undefined when there is no complete build. */
function builtAt(root) {
  try {
    return statSync(new URL('dist/.built', root)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The source trees the build compiles, relative to the repository. */
export const SOURCE_DIRS = ['src', 'packages/client/src'];

/** Whether any TypeScript source changed after `time` (a few hundred stats: a millisecond or two). */
function sourcesNewerThan(root, time) {
  for (const dir of SOURCE_DIRS) {
    for (const entry of readdirSync(new URL(dir, root), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ts') && statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs > time) return true;
    }
  }
  return false;
}

/** `root` is the repository's URL, ending in a slash. */
export function distIsFresh(root) {
  const built = builtAt(root);
  return built !== undefined && !sourcesNewerThan(root, built);
}
