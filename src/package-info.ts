// The service's name for itself: package.json's version and licence, read once, so a release
// cannot forget to update them (the OpenAPI document and the webhook User-Agent state them).
import { readFileSync } from 'node:fs';

export interface PackageInfo {
  version: string;
  license: string;
}

let cached: PackageInfo | undefined;

export function packageInfo(): PackageInfo {
  if (cached) return cached;
  // src/ and dist/ both sit one level below the package root.
  const parsed: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const { version, license } = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  if (typeof version !== 'string' || typeof license !== 'string') throw new Error('package.json must name a version and a license');
  cached = { version, license };
  return cached;
}
