/**
 * Which repository configuration git may run under. A repository's config is written by whoever
 * controls the repository, and many keys make git run a program or read a file (`trailer.*.command`,
 * `interactive.diffFilter`, `include.path`, `core.worktree` …). Overriding each known key on the command
 * line (see `git-hardening.ts`) leaves the next unknown key open, so configuration is trusted only
 * through an allowlist, checked on the effective config (includes resolved) before each git command:
 *
 * - inert keys (identity, line endings, branch tracking, colours …) are fine;
 * - any key that can name a program, a file or a directory is `deny`: nothing a human could approve
 *   makes it safe, and removing it is one `git config --unset` (which itself needs approval) away;
 * - every other key is `approval`;
 * - remote URLs must be ones the workspace was first seen with, or ones a human approved.
 *
 * Pure: the caller lists the configuration and knows the recorded remotes.
 */

export type ConfigTier = 'allow' | 'approval' | 'deny';

export interface ConfigEntry {
  /** Where git read it (`file:.git/config`, `command line:` …). */
  origin: string;
  key: string;
  value: string;
}

/** Keys (lower-cased; `*` is one subsection name) with no effect on what git runs or which files it touches. */
const INERT_KEYS: readonly RegExp[] = [
  /^user\.(name|email|usecfgonly)$/,
  /^author\.(name|email)$/,
  /^committer\.(name|email)$/,
  /^core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|autocrlf|eol|safecrlf|symlinks|quotepath|abbrev|compression|loosecompression|whitespace|untrackedcache|checkstat|trustctime|splitindex|preloadindex|fscache|longpaths|commitgraph|multipackindex|warnambiguousrefs|deltabasecachelimit|bigfilethreshold|packedgitlimit|packedgitwindowsize|checkroundtripencoding|fsyncmethod|fsync)$/,
  /^extensions\.(worktreeconfig|objectformat|refstorage|preciousobjects|noop)$/,
  /^branch\.[^.]+(\..+)?\.(remote|merge|rebase|pushremote|description)$/,
  /^branch\.(autosetupmerge|autosetuprebase|sort)$/,
  /^remote\.[^.]+(\..+)?\.(tagopt|prune|prunetags|skipdefaultupdate|skipfetchall|promisor|partialclonefilter)$/,
  /^init\.defaultbranch$/,
  /^color\.[a-z.]+$/,
  /^column\.[a-z]+$/,
  /^advice\.[a-z]+$/,
  /^(pull|merge)\.(rebase|ff|conflictstyle|stat|log|renames|renamelimit|verbosity|autostash|directoryrenames)$/,
  /^push\.(default|autosetupremote|usebitmaps|negotiate)$/,
  /^fetch\.(prune|prunetags|parallel|writecommitgraph|showforcedupdates|output)$/,
  /^diff\.(renames|algorithm|mnemonicprefix|noprefix|relative|context|interhunkcontext|renamelimit|indentheuristic|colormoved|colormovedws|statgraphwidth|suppressblankempty|wserrorhighlight|submodule|ignoresubmodules|dirstat|autorefreshindex)$/,
  /^log\.(abbrevcommit|date|decorate|follow|graphcolors|showroot|mailmap|initialdecorationset|excludedecoration|showsignature)$/,
  /^status\.(short|branch|showstash|showuntrackedfiles|relativepaths|aheadbehind|renames|renamelimit|submodulesummary|displaycommentprefix)$/,
  /^commit\.(status|verbose|cleanup|gpgsign)$/,
  /^tag\.(sort|gpgsign|forcesignannotated)$/,
  /^gc\.(auto|autopacklimit|autodetach|pruneexpire|reflogexpire|reflogexpireunreachable|writecommitgraph)$/,
  /^index\.(version|threads|skiphash|sparse)$/,
  /^pack\.(threads|window|depth|compression|writereverseindex|usebitmaps)$/,
  /^receive\.(denycurrentbranch|denynonfastforwards|denydeletes)$/,
  /^rebase\.(autosquash|autostash|stat|updaterefs|missingcommitscheck|abbreviatecommands)$/,
  /^rerere\.(enabled|autoupdate)$/,
  /^i18n\.(commitencoding|logoutputencoding)$/,
  /^feature\.(manyfiles|experimental)$/,
  /^maintenance\.(auto|strategy)$/,
  /^help\.autocorrect$/,
  /^blame\.(date|showemail|coloring|markunblamablelines|markignoredlines)$/,
  /^grep\.(linenumber|column|extendedregexp|patterntype|fullname|fallbacktonoindex)$/,
  /^format\.(pretty|numbered|signoff|coverletter)$/,
  /^safe\.bareRepository$/i,
];

/**
 * The last segment (or whole key) of keys whose value names a program, a file, a directory, a
 * command, or a URL rewrite: never run under these. Matched against the lower-cased key.
 */
const PROGRAM_OR_PATH_KEYS: readonly RegExp[] = [
  /\.(command|cmd|program|driver|textconv|helper|editor|pager|path|file|dir|directory|hookspath|worktree|exec|script|tool|askpass|browser|template|templatedir|sshcommand|fsmonitor|external|difffilter|gitproxy|proxy|proxycommand|uploadpack|receivepack|vcs|clean|smudge|process|attributesfile|excludesfile|cainfo|capath|sslcert|sslkey|sslcainfo|sslcapath|cookiefile|insteadof|pushinsteadof|defaultkeycommand|alternaterefscommand|alternaterefsprefixes|notesref|mailmap|blob|orderfile|signingkey|variant|socket)$/,
  /^(alias|include|includeif|filter|credential|gpg|pager|difftool|mergetool|man|browser|sendemail|trailer|url|uploadpack|uploadarchive|http|ssh|protocol|instaweb|imap|guitool|gui|sequence|interactive|lfs|hook|safe)\./,
  /^submodule\..+\.update$/,
  /^core\.(editor|pager|hookspath|worktree|sshcommand|fsmonitor|askpass|gitproxy|attributesfile|excludesfile|notesref|sharedrepository|createobject)$/,
  /^diff\.external$/,
  /^mailmap\./,
  /^blame\.ignorerevsfile$/,
  /^commit\.template$/,
  /^web\.browser$/,
];

/** The tier of one configuration key (the remote URL rule is applied separately, by `judgeConfig`). */
export function judgeConfigKey(key: string): { tier: ConfigTier; why: string } {
  const lower = key.toLowerCase();
  if (/^remote\.[^.]+(\..+)?\.(url|pushurl)$/.test(lower))
    return { tier: 'allow', why: 'a remote URL (checked against the recorded remotes)' };
  if (/^remote\.[^.]+(\..+)?\.fetch$/.test(lower))
    return { tier: 'allow', why: 'a fetch refspec (checked against the default shape)' };
  if (INERT_KEYS.some((pattern) => pattern.test(lower))) return { tier: 'allow', why: 'an inert setting' };
  if (PROGRAM_OR_PATH_KEYS.some((pattern) => pattern.test(lower))) {
    return { tier: 'deny', why: 'it can name a program, a file or a directory for git to run or read' };
  }
  return { tier: 'approval', why: 'it is not on the list of known-inert settings' };
}

/** The default fetch refspec shape: remote branches land under `refs/remotes/<name>/`, never in local branches. */
function isDefaultFetchRefspec(remote: string, value: string): boolean {
  const escaped = remote.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^\\+?refs/heads/(\\*|[A-Za-z0-9._/-]+):refs/remotes/${escaped}/(\\*|[A-Za-z0-9._/-]+)$`).test(
    value,
  );
}

export interface ConfigJudgement {
  tier: ConfigTier;
  reason: string;
  /** Remote URLs configured but neither recorded nor approved. */
  unknownRemoteUrls: string[];
}

/**
 * The tier for running git under `entries`. `knownRemoteUrls` are the URLs recorded for the
 * workspace (first sight or human approval).
 */
export function judgeConfig(entries: readonly ConfigEntry[], knownRemoteUrls: ReadonlySet<string>): ConfigJudgement {
  const denied: string[] = [];
  const unknown: string[] = [];
  const unknownUrls = new Set<string>();
  for (const entry of entries) {
    // Settings from the runner's own command line are the hardening itself.
    if (entry.origin.startsWith('command line')) continue;
    const judged = judgeConfigKey(entry.key);
    const lower = entry.key.toLowerCase();
    if (judged.tier === 'deny') denied.push(`${entry.key} (${judged.why})`);
    else if (judged.tier === 'approval') unknown.push(entry.key);
    else if (/\.(url|pushurl)$/.test(lower) && lower.startsWith('remote.') && !knownRemoteUrls.has(entry.value))
      unknownUrls.add(entry.value);
    else if (lower.startsWith('remote.') && lower.endsWith('.fetch')) {
      const remote = entry.key.slice('remote.'.length, -'.fetch'.length);
      if (!isDefaultFetchRefspec(remote, entry.value)) unknown.push(`${entry.key}=${entry.value}`);
    }
  }
  if (denied.length > 0) {
    return {
      tier: 'deny',
      reason: `the repository configuration sets ${denied.slice(0, 3).join(', ')}; git never runs under such configuration (remove it with \`git config --unset\`, which needs approval)`,
      unknownRemoteUrls: [...unknownUrls],
    };
  }
  if (unknownUrls.size > 0 || unknown.length > 0) {
    const parts = [
      unknownUrls.size > 0
        ? `remote URL(s) ${[...unknownUrls].map((u) => JSON.stringify(u)).join(', ')} that this workspace was not created with and no human approved`
        : '',
      unknown.length > 0 ? `setting(s) ${unknown.slice(0, 5).join(', ')} that are not known to be inert` : '',
    ].filter(Boolean);
    return {
      tier: 'approval',
      reason: `the repository configuration has ${parts.join(' and ')}`,
      unknownRemoteUrls: [...unknownUrls],
    };
  }
  return { tier: 'allow', reason: 'the repository configuration is inert', unknownRemoteUrls: [] };
}

/** Entries of `git config --list --show-origin --includes --null` (`origin\0key\nvalue\0` per entry). */
export function parseConfigListing(listing: string): ConfigEntry[] {
  const fields = listing.split('\0');
  const entries: ConfigEntry[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const origin = fields[i] as string;
    const body = fields[i + 1] as string;
    const newline = body.indexOf('\n');
    entries.push(
      newline === -1
        ? { origin, key: body, value: '' }
        : { origin, key: body.slice(0, newline), value: body.slice(newline + 1) },
    );
  }
  return entries;
}
