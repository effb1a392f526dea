// need.mjs — what a node test does when something it needs is not here: the one place
// that decides skip or fail, twin of check_need in tests/unit/check.h.
//
// A dependency `make test` installs itself (Makefile TEST_PKGS: chromium, Slurm and
// munge, dataset-fashion-mnist, Debian's Python modules) that is missing is a skip
// with its reason on a developer's machine, and a failure where CI is set (.ci/run
// runs under CI=true): there a missing one is a broken install, which a skip would
// hide.  Something no machine of the suite's can be made to have (a GPU) is a plain
// t.skip(why) instead.  Either way the reason reaches tests/run.sh's "skipped:" list.
import assert from 'node:assert/strict';

/** Whether this is CI: CI set to anything but "", "0" or "false". */
export const CI = !['', '0', 'false'].includes(process.env.CI ?? '');

/** why: falsy when the dependency is here, else a sentence saying what is missing.
 *  Returns false when it is here; true when test t was skipped (return at once);
 *  where CI is set it throws instead, failing t. */
export function need(t, why) {
  if (!why) return false;
  if (CI) assert.fail(`${why} (CI is set, and \`make test\` installs this: Makefile TEST_PKGS)`);
  t.skip(why);
  return true;
}
