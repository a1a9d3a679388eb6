"""Word lists the entity and phrase heuristics share (hand-written; lower case, straight apostrophes).

- ``STOPWORDS``: function words (articles, pronouns, auxiliaries, prepositions, conjunctions).
- ``CHATTER``: content-poor words that dominate chat: interjections, evaluative adjectives, common verbs
  in their inflected forms, adverbs, generic nouns. A noun phrase never contains one, and a capitalized
  word that opens a sentence is no name when it is one of these.
- ``DATE_WORDS``: calendar words; dates are extracted separately, so they are neither entities nor topics.
"""

from __future__ import annotations

MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December")  # English whatever the locale (calendar's follow it)
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _words(block: str) -> frozenset[str]:
    return frozenset(block.split())


STOPWORDS = _words("""
a about above across after afterwards again against all almost alone along already also although always
am among amongst an and another any anybody anyone anything anyway anyways anywhere are aren't around as
at be because been before beforehand behind being below beside besides between beyond both but by can
can't cannot could couldn't did didn't do does doesn't doing don't done down during each either else
enough etc even ever every everybody everyone everything everywhere except few for from further had
hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his
how how's however i i'd i'll i'm i've ie if in inside instead into is isn't it it'd it'll it's its
itself just least less let let's many may me might mightn't mine more moreover most mostly much must
mustn't my myself neither never nevertheless no nobody none noone nor not nothing now nowhere of off
often on once one ones only onto or other others otherwise ought our ours ourselves out outside over
own per perhaps quite rather same shall shan't she she'd she'll she's should shouldn't since so some
somebody somehow someone something sometime sometimes somewhat somewhere such than that that'd that'll
that's the their theirs them themselves then there there'd there'll there's thereby therefore these
they they'd they'll they're they've this those though through throughout thru thus till to together
too toward towards under unless until up upon us very via vs was wasn't we we'd we'll we're we've were
weren't what what'd what'll what's whatever when when's whenever where where's whereas wherever whether
which while who who'd who'll who's whoever whole whom whose why why's will with within without won't
would wouldn't y'all yet you you'd you'll you're you've your yours yourself yourselves ya ur u im ive
id ill dont doesnt didnt cant wont isnt arent wasnt werent couldnt wouldnt shouldnt thats theres whats
youre youve theyre hes shes lets
""")

CHATTER = _words("""
hey hi hello hiya howdy yo wow whoa woah oh ooh ah aah aw aww awww omg gosh geez jeez yay yeah yea yep
yup yes no nope nah ok okay k sure thanks thank thx ty congrats congratulations lol lmao haha hahaha
hehe hmm hm um umm uh well cool great awesome amazing nice good glad sorry please bye goodbye cheers
totally definitely absolutely exactly indeed right true agreed ugh dude man guys buddy pal bro btw tbh
alright welcome wonderful fantastic incredible lovely sweet cute beautiful gorgeous stunning brilliant
excellent perfect super terrific fabulous neat wild crazy insane unreal epic rad dope sick legit
impressive inspiring inspirational inspired rewarding exciting excited thrilled stoked pumped proud
happy sad scary scared tough hard easy fun funny interesting important special different unique
amazing awful terrible horrible bad worse worst better best fine okay ok glad grateful thankful lucky
blessed honored touched moved overwhelmed stressed stressful nervous anxious worried tired exhausted
busy free ready able sure certain possible impossible real actual big huge small tiny little large
long short high low old new young whole entire full empty main major minor key top certain various
several many much more most less least lots lot bit bits kind kinds sort sorts type types way ways
thing things stuff something anything everything nothing someone anyone everyone people person folks
guy girl time times moment moments while part parts place places point points side sides piece pieces
really actually probably maybe certainly especially honestly basically literally seriously finally
recently lately usually normally generally always sometimes often rarely seldom soon later earlier
ago again already almost also still away back ahead around instead pretty kinda sorta kind-of truly
hopefully luckily unfortunately fortunately thankfully sadly obviously apparently clearly surely
simply mainly mostly nearly quickly slowly twice once far else anymore though although lately
definitely totally completely entirely fully hugely deeply highly greatly incredibly extremely super
so such very quite rather enough here there now then just only even ever never yet both
be is are was were been being am have has had having do does did done doing go goes went gone going
get gets got gotten getting make makes made making take takes took taken taking come comes came
coming see sees saw seen seeing know knows knew known knowing think thinks thought thinking thoughts
feel feels felt feeling look looks looked looking want wants wanted wanting need needs needed needing
love loves loved loving like likes liked liking try tries tried trying keep keeps kept keeping lets
letting give gives gave given giving tell tells told telling say says said saying find finds found
finding put puts putting use uses used using help helps helped helping start starts started starting
begin begins began begun beginning show shows showed shown showing hear hears heard hearing talk talks
talked talking chat chats chatted chatting mean means meant meaning seem seems seemed seeming sound
sounds sounded hope hopes hoped hoping wish wishes wished wishing enjoy enjoys enjoyed enjoying share
shares shared sharing bring brings brought bringing stay stays stayed staying happen happens happened
happening remember remembers remembered remembering forget forgets forgot forgotten guess guessed bet
believe believes believed imagine imagined appreciate appreciates appreciated appreciating check
checked checking miss misses missed wait waits waited waiting gonna wanna gotta care cares cared
matter matters mattered mind decide decides decided deciding meet meets met spend spends spent
spending become becomes became stop stops stopped stopping reach reached set sets leave leaves left
leaving hold holds held turn turns turned turning ask asks asked asking call calls called calling
continue continued keep kept allow allowed let lead led realize realized realise realised notice
noticed understand understood agree agreed add added manage managed end ended ending got gets
includes include included including wonder wondered wondering excite inspire inspires motivate
motivates motivated motivating encourage encouraged encouraging reckon figure figured
says saying reminds remind reminded means makes sounds seems hear catch caught
can could would should might must will shall may
good great nice cool awesome amazing fun glad
first second third last next previous other another same own
one two three four five six seven eight nine ten eleven twelve hundred thousand million
everyday anyway non-stop yesterday today tonight tomorrow
broke powerful meaningful peaceful helpful useful awful mom mum dad mommy daddy mama papa grandma grandpa
""")

# Words that open chat sentences capitalized and are no names: more interjections, and common nouns and
# verbs (the entity heuristic also rejects -ing/-ly/-ed/-ness/-tion/... forms and plurals there).
SENTENCE_OPENERS = _words("""
woohoo woo woo-hoo yess yesss oof ouch phew whew gotcha yum yummy mmm mm hmmm ooo oooh ha hah hahah
ttyl dang darn kudos bummer anytime lemme looky sames oops whoops ahh ahhh hooray bravo boo meh eh
plus nature life art music dance yoga rock pottery change push count hang cherish positive mental
family friends kids work school love food health exercise sports travel home fitness faith hope
success confidence patience balance strength friendship quality trust respect safety support
creativity expression dedication guidance laughter rest adoption community business money growth
therapy clay gather create spill chase store tackle capture meal simple zen speak read build see
follow words themes movies chess coconut chef video lab mix fetch frisbee plants email bet overall
visual unconditional strong brave perfect contemporary cozy respect lost fantasy sports movie game
games finals events books pets animals dogs cats fingers challenges setbacks struggles wolves weddings
stories trips exams assignments tournaments turtles horses flowers sunflowers veggies allergies
mentors obstacles rejections rejection unemployment injury struggle difficult confident competitive
dedication domestic doggy chicken garlic sushi basketball guitar panda apart jealous adorable
unforgettable precious real-life money-wise cheers congratulations welcome sounds looks seems feels
someday sometime maybe dyed sure wish hope glad keep let stay take enjoy remember imagine check look
listen watch try find get
""")

DATE_WORDS = frozenset(
    [m.lower() for m in MONTH_NAMES] + [d.lower() for d in WEEKDAY_NAMES]
    + "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun".split()
    + """day days week weeks weekend weekends month months year years decade decades today tonight
    tomorrow yesterday morning mornings afternoon evening evenings night nights ago spring summer fall
    autumn winter christmas xmas easter halloween thanksgiving hour hours minute minutes am pm""".split())

ACRONYM_NOISE = frozenset("""ok okay lol lmao omg btw tbh imo imho fyi asap am pm idk brb rofl ty thx tv
diy ps""".split())
