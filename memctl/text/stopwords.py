"""Stopword lists, side by side: words dropped before matching because they carry no content.

Four lists, each read by a fitted model or a measured feature, so they stay as they are: `ENGLISH`
(keyword search: BM25 query words, rare and name tokens; search's word overlap), `CJK` (keyword
queries in Chinese and Japanese), `GROUNDING` (memorize's grounding and keyword evidence) and
`IMPORTANCE` (importance's word overlap).
"""

from __future__ import annotations

ENGLISH = frozenset(
    """
a about above after again all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now
of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves
tell know remember please get got us let lets like one thing things something anything
""".split()
)

CJK = frozenset(
    """
的 了 是 在 我 你 他 她 它 们 我们 你们 他们 她们 咱们 这 那 这个 那个 这些 那些 什么
怎么 怎样 如何 吗 呢 吧 啊 呀 哦 嗯
和 与 及 或 或者 也 都 就 还 又 把 被 给 让 对 从 到 向 用 有 没有 没 不 很 会 能 要
想 请 一下 一个 个 为什么 为 哪 哪个 哪里 哪些
时候 的话 以后 之前 之后 现在 可以 应该 需要 知道 告诉 记得 一些 一直 已经 所以 因为 但是 但
如果 而且 并且 就是 还是 时 上 下 中 里
の は が を に で と も へ や か な ね よ から まで より です ます でした ました ください
ですか ますか して した する こと これ それ あれ
どこ なに なん いつ だれ どう どの この その あの ある いる ない
은 는 이 가 을 를 의 에 에서 와 과 도 만 로 으로 저 제 나 내 그 이것 그것 무엇 뭐 어디
언제 어떻게 왜 누구
""".split()
)

GROUNDING = frozenset(
    """
a an the and or but nor of to in on at by for with from into onto over under as than then that this these those
it its it's is are am was were be been being has have had do does did can could must should shall will would may
might not no never ever all any every each some such very just only also so too there here their them they he she
his her our ours we you your i me my mine about after before via per if when while which who whom whose what where
why how
""".split()
)

IMPORTANCE = frozenset(
    """a an and are as at be but by for from has have he her his i if in into is it its me my no not
of on or our she so than that the their them then there these they this to too us was we were what when which who
will with you your user users uses use please thanks also just now""".split()
)
