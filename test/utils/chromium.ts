/**
 * Headless Chromium for the browser specs: Debian's `chromium` package driven by playwright-core
 * (whose own browser download is not used). A spec skips, with the reason printed, when chromium is
 * absent — unless GENEVA_DRIVE_TEST_REQUIRE lists `chromium`, and then it fails.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.GD_CHROMIUM_PATH ?? '/usr/bin/chromium';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Why the browser specs cannot run here, or null when they can (or must). */
export function chromiumSkipReason(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  const required = (process.env.GENEVA_DRIVE_TEST_REQUIRE ?? '').split(',').map((name) => name.trim()).includes('chromium');
  if (required) return null; // launching fails and says so
  return `${CHROMIUM_PATH} not found (apt-get install -y chromium); set GENEVA_DRIVE_TEST_REQUIRE=chromium to make this a failure`;
}

/** A fresh browser profile; `close()` ends the browser and removes the profile. */
export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`GENEVA_DRIVE_TEST_REQUIRE includes chromium, but ${CHROMIUM_PATH} does not exist`);
  const profile = mkdtempSync(join(tmpdir(), 'gd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM_PATH, headless: true, args: ARGS });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
