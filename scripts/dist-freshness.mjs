// Whether dist/ is a complete build of the current sources: its stamp (written last by
// scripts/build.mjs) is newer than every TypeScript file under src/. Shared by the build (to skip
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

/** Whether any TypeScript source under src/ changed after `time` (about a hundred stats: a millisecond or two). */
function sourcesNewerThan(root, time) {
  for (const entry of readdirSync(new URL('src', root), { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts') && statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs > time) return true;
  }
  return false;
}

/** `root` is the repository's URL, ending in a slash. */
export function distIsFresh(root) {
  const built = builtAt(root);
  return built !== undefined && !sourcesNewerThan(root, built);
}
